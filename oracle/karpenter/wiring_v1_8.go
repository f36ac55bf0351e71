//go:build karpenter_v1_8

package main

// Karpenter v1.8 wired as its controller wires it (aws/karpenter-provider-aws v1.8.6
// `cmd/controller/main.go`, core v1.8.2 `pkg/controllers/controllers.go` `NewControllers`).

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	nodepoolreadiness "sigs.k8s.io/karpenter/pkg/controllers/nodepool/readiness"
	nodepoolvalidation "sigs.k8s.io/karpenter/pkg/controllers/nodepool/validation"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	coretest "sigs.k8s.io/karpenter/pkg/test"

	"github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
	awstest "github.com/aws/karpenter-provider-aws/pkg/test"
)

const release = "v1.8.6"

func newKarpenter(ctx context.Context, kube client.Client, clientset kubernetes.Interface, s *Scenario, o *scenarioObjects) (*karpenter, error) {
	env := awstest.NewEnvironment(ctx, &coretest.Environment{Client: kube, KubernetesInterface: clientset})
	feedEC2(env.EC2API, s, o.nodeClass)
	feedSpotPrices(env.EC2API, s, env.PricingProvider)
	// As Karpenter's pricing controller: a failed update (no spot price at all) keeps the static
	// prices, it does not stop the controller.
	_ = env.PricingProvider.UpdateSpotPricing(ctx)
	if err := env.InstanceTypesProvider.UpdateInstanceTypes(ctx); err != nil {
		return nil, err
	}
	if err := env.InstanceTypesProvider.UpdateInstanceTypeOfferings(ctx); err != nil {
		return nil, err
	}
	recorder := events.NewRecorder(discardRecorder())
	aws := cloudprovider.New(
		env.InstanceTypesProvider,
		env.InstanceProvider,
		recorder,
		kube,
		env.AMIProvider,
		env.SecurityGroupProvider,
		env.CapacityReservationProvider,
		env.InstanceTypeStore,
	)
	cp := overlay.Decorate(metrics.Decorate(aws), kube, env.InstanceTypeStore)
	clk := clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cp)
	provisioner := provisioning.NewProvisioner(kube, recorder, cp, cluster, clk)
	validation := nodepoolvalidation.NewController(kube, cp)
	readiness := nodepoolreadiness.NewController(kube, cp)
	return &karpenter{
		kube:          kube,
		cloudProvider: cp,
		cluster:       cluster,
		provisioner:   provisioner,
		debug: func() {
			fmt.Fprintf(os.Stderr, "create LT calls: %d\n", env.EC2API.CreateLaunchTemplateBehavior.CalledWithInput.Len())
			env.EC2API.CreateLaunchTemplateBehavior.CalledWithInput.ForEach(func(i *ec2.CreateLaunchTemplateInput) {
				fmt.Fprintf(os.Stderr, "  LT %s image %v\n", *i.LaunchTemplateName, i.LaunchTemplateData.ImageId)
			})
			fmt.Fprintf(os.Stderr, "fleet calls: %d\n", env.EC2API.CreateFleetBehavior.CalledWithInput.Len())
		},
		reconcileNodePool: func(ctx context.Context, np *karpv1.NodePool) error {
			if _, err := validation.Reconcile(ctx, np); err != nil {
				return err
			}
			_, err := readiness.Reconcile(ctx, np)
			return err
		},
	}, nil
}
