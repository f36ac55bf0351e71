package main

// The scenario's EC2 answers, given to the AWS provider's own fake EC2 API: DescribeInstanceTypes
// and DescribeInstanceTypeOfferings as EC2 documents them, the class's subnets as
// DescribeSubnets answers them. The fake ignores request filters, so the scenario holds only what
// Karpenter's filters would let through (hvm, x86_64 or arm64).

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
)

func instanceTypeInfo(t InstanceType) ec2types.InstanceTypeInfo {
	var archs []ec2types.ArchitectureType
	for _, a := range t.Architectures {
		archs = append(archs, ec2types.ArchitectureType(a))
	}
	var usage []ec2types.UsageClassType
	for _, u := range t.UsageClasses {
		usage = append(usage, ec2types.UsageClassType(u))
	}
	hypervisor := ec2types.InstanceTypeHypervisor(t.Hypervisor)
	if t.Hypervisor == "" && !t.BareMetal {
		hypervisor = ec2types.InstanceTypeHypervisorNitro
	}
	manufacturer := t.Manufacturer
	if manufacturer == "" {
		manufacturer = "Intel"
		for _, a := range t.Architectures {
			if a == "arm64" {
				manufacturer = "AWS"
			}
		}
	}
	return ec2types.InstanceTypeInfo{
		InstanceType:                  ec2types.InstanceType(t.Name),
		SupportedUsageClasses:         usage,
		SupportedVirtualizationTypes:  []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		BareMetal:                     aws.Bool(t.BareMetal),
		Hypervisor:                    hypervisor,
		CurrentGeneration:             aws.Bool(true),
		InstanceStorageSupported:      aws.Bool(false),
		BurstablePerformanceSupported: aws.Bool(false),
		ProcessorInfo: &ec2types.ProcessorInfo{
			SupportedArchitectures: archs,
			Manufacturer:           aws.String(manufacturer),
		},
		VCpuInfo:   &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(t.VCPUs)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(t.MemoryMiB)},
		EbsInfo: &ec2types.EbsInfo{
			EbsOptimizedSupport: ec2types.EbsOptimizedSupportDefault,
			EncryptionSupport:   ec2types.EbsEncryptionSupportSupported,
			NvmeSupport:         ec2types.EbsNvmeSupportRequired,
		},
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces:  aws.Int32(t.MaximumNetworkInterfaces),
			Ipv4AddressesPerInterface: aws.Int32(t.IPv4AddressesPerInterface),
			DefaultNetworkCardIndex:   aws.Int32(0),
			NetworkCards: []ec2types.NetworkCardInfo{{
				NetworkCardIndex:         aws.Int32(0),
				MaximumNetworkInterfaces: aws.Int32(t.MaximumNetworkInterfaces),
			}},
			EfaSupported:                 aws.Bool(false),
			EncryptionInTransitSupported: aws.Bool(false),
		},
	}
}

// onDemandPrices says what the pricing provider knows of a type's on-demand price.
type onDemandPrices interface {
	OnDemandPrice(ec2types.InstanceType) (float64, bool)
}

// spotPrice is what spot costs against on-demand in the scenario's answers: well below it, as
// spot is (a spot price at the on-demand price makes Karpenter drop the spot offerings at
// launch, `instancefilter.SpotOfferingFilter`, which no real region shows).
const spotPrice = 0.4

// feedSpotPrices answers DescribeSpotPriceHistory with a spot price for every type EC2 sells as
// spot, in every zone it is offered in.
func feedSpotPrices(api *fake.EC2API, s *Scenario, prices onDemandPrices) {
	var history []ec2types.SpotPrice
	now := time.Now()
	for _, t := range s.InstanceTypes {
		spot := false
		for _, u := range t.UsageClasses {
			spot = spot || u == "spot"
		}
		onDemand, ok := prices.OnDemandPrice(ec2types.InstanceType(t.Name))
		if !spot || !ok {
			continue
		}
		for _, z := range t.Zones {
			history = append(history, ec2types.SpotPrice{
				InstanceType:       ec2types.InstanceType(t.Name),
				AvailabilityZone:   aws.String(z),
				ProductDescription: ec2types.RIProductDescription("Linux/UNIX"),
				SpotPrice:          aws.String(strconv.FormatFloat(onDemand*spotPrice, 'f', 6, 64)),
				Timestamp:          aws.Time(now),
			})
		}
	}
	api.DescribeSpotPriceHistoryBehavior.Output.Set(&ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: history})
}

// feedEC2 gives the fake EC2 API the scenario's instance types, offerings and the class's subnets.
func feedEC2(api *fake.EC2API, s *Scenario, nodeClass *v1.EC2NodeClass) {
	var infos []ec2types.InstanceTypeInfo
	var offerings []ec2types.InstanceTypeOffering
	for _, t := range s.InstanceTypes {
		infos = append(infos, instanceTypeInfo(t))
		for _, z := range t.Zones {
			offerings = append(offerings, ec2types.InstanceTypeOffering{
				InstanceType: ec2types.InstanceType(t.Name),
				Location:     aws.String(z),
				LocationType: ec2types.LocationTypeAvailabilityZone,
			})
		}
	}
	api.DescribeInstanceTypesOutput.Set(&ec2.DescribeInstanceTypesOutput{InstanceTypes: infos})
	api.DescribeInstanceTypeOfferingsOutput.Set(&ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: offerings})
	for _, subnet := range nodeClass.Status.Subnets {
		api.Subnets.Store(subnet.ID, ec2types.Subnet{
			SubnetId:                aws.String(subnet.ID),
			AvailabilityZone:        aws.String(subnet.Zone),
			AvailabilityZoneId:      aws.String(subnet.ZoneID),
			AvailableIpAddressCount: aws.Int32(4000),
			MapPublicIpOnLaunch:     aws.Bool(false),
			VpcId:                   aws.String("vpc-test1"),
		})
	}
}
