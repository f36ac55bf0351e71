"""Seeds the bed's moto server with the AWS side of the demo: an EKS cluster and its VPC, node and
controller roles, an instance profile and security groups. Idempotent: re-running is harmless."""
import json
import os
import sys

import boto3
from botocore.exceptions import ClientError

endpoint = os.environ["KH_MOTO_URL"]
region = os.environ.get("AWS_REGION", "us-east-1")
cluster = os.environ.get("DEMO_CLUSTER", "demo")
session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region)
iam = session.client("iam", endpoint_url=endpoint)
ec2 = session.client("ec2", endpoint_url=endpoint)
eks = session.client("eks", endpoint_url=endpoint)

EC2_TRUST = json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
})
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                 "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"]


def ignore_exists(call, **kwargs):
    try:
        return call(**kwargs)
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("EntityAlreadyExists", "ResourceInUseException", "LimitExceeded"):
            raise


def node_role(name):
    ignore_exists(iam.create_role, RoleName=name, AssumeRolePolicyDocument=EC2_TRUST)
    for policy in NODE_POLICIES:
        iam.attach_role_policy(RoleName=name, PolicyArn=f"arn:aws:iam::aws:policy/{policy}")


for role in (f"KarpenterNodeRole-{cluster}", f"KarpenterNodeRole-{cluster}-batch"):
    node_role(role)
profile = f"KarpenterNodeInstanceProfile-{cluster}"
if ignore_exists(iam.create_instance_profile, InstanceProfileName=profile) is not None:
    iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=f"KarpenterNodeRole-{cluster}")

vpcs = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [cluster]}])["Vpcs"]
if vpcs:
    vpc_id = vpcs[0]["VpcId"]
else:
    vpc_id = ec2.create_vpc(CidrBlock="10.20.0.0/16", TagSpecifications=[
        {"ResourceType": "vpc", "Tags": [{"Key": "Name", "Value": cluster}]}])["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.20.1.0/24", TagSpecifications=[
        {"ResourceType": "subnet", "Tags": [{"Key": "karpenter.sh/discovery", "Value": cluster}]}])
    ec2.create_security_group(GroupName=f"{cluster}-nodes", Description="nodes", VpcId=vpc_id, TagSpecifications=[
        {"ResourceType": "security-group", "Tags": [
            {"Key": "karpenter.sh/discovery", "Value": cluster},
            {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"}]}])
    ec2.create_security_group(GroupName="shared-with-other", Description="other cluster", VpcId=vpc_id,
                              TagSpecifications=[{"ResourceType": "security-group", "Tags": [
                                  {"Key": "team", "Value": "shared"},
                                  {"Key": "kubernetes.io/cluster/other", "Value": "owned"}]}])
    subnet_id = subnet["Subnet"]["SubnetId"]
    # Where nodes land: the private subnet's default route goes to a NAT gateway in a public
    # subnet, and the VPC resolves DNS, so SubnetsReady and NodeNetworkReady are True.
    public = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.20.0.0/24")["Subnet"]["SubnetId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc_id)
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=public, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    route_table = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=route_table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
    ec2.associate_route_table(RouteTableId=route_table, SubnetId=subnet_id)
    ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsSupport={"Value": True})
    ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    # The bed's Kubernetes version (its API server's), which Karpenter reads too.
    ignore_exists(eks.create_cluster, name=cluster, version=os.environ.get("DEMO_KUBERNETES", "1.34"),
                  roleArn=f"arn:aws:iam::123456789012:role/{cluster}-cluster",
                  resourcesVpcConfig={"subnetIds": [subnet_id]})

# The controller's wiring: the cluster's IAM OIDC provider, and a controller role that trusts the
# Karpenter ServiceAccount through it and may pass both node roles and launch (Karpenter's
# getting-started policy, reduced). The demo's broken wiring is in seed.yaml: a spot NodePool in an
# account without the spot service-linked role.
issuer = eks.describe_cluster(name=cluster)["cluster"]["identity"]["oidc"]["issuer"]
host_path = issuer.removeprefix("https://")
providers = [p["Arn"] for p in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]]
provider = next((p for p in providers if p.endswith(f":oidc-provider/{host_path}")), None)
if provider is None:
    provider = iam.create_open_id_connect_provider(
        Url=issuer, ClientIDList=["sts.amazonaws.com"],
        ThumbprintList=["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"])["OpenIDConnectProviderArn"]
controller = f"KarpenterControllerRole-{cluster}"
trust = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Federated": provider}, "Action": "sts:AssumeRoleWithWebIdentity",
    "Condition": {"StringEquals": {f"{host_path}:sub": "system:serviceaccount:kube-system:karpenter",
                                   f"{host_path}:aud": "sts.amazonaws.com"}}}]})
ignore_exists(iam.create_role, RoleName=controller, AssumeRolePolicyDocument=trust)
iam.update_assume_role_policy(RoleName=controller, PolicyDocument=trust)
iam.put_role_policy(RoleName=controller, PolicyName="KarpenterControllerPolicy", PolicyDocument=json.dumps({
    "Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "iam:PassRole",
         "Resource": [f"arn:aws:iam::123456789012:role/KarpenterNodeRole-{cluster}",
                      f"arn:aws:iam::123456789012:role/KarpenterNodeRole-{cluster}-batch"],
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
        {"Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
         "Resource": "*", "Condition": {
             "StringEquals": {f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
                              "aws:RequestTag/eks:eks-cluster-name": cluster},
             "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        # Tagging on create, which RunInstances and CreateFleet with tags need (Karpenter's
        # template: AllowScopedResourceCreationTagging).
        {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*", "Condition": {
             "StringEquals": {f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
                              "aws:RequestTag/eks:eks-cluster-name": cluster,
                              "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
             "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Effect": "Allow", "Action": ["iam:CreateInstanceProfile", "iam:TagInstanceProfile",
                                       "iam:AddRoleToInstanceProfile"], "Resource": "*"},
        # Resolving an AMI alias (Karpenter's template: AllowSSMReadActions).
        {"Effect": "Allow", "Action": "ssm:GetParameter",
         "Resource": f"arn:aws:ssm:{region}::parameter/aws/service/*"},
        # Resolving every image, and the other regional reads (AllowRegionalReadActions).
        {"Effect": "Allow",
         "Action": ["ec2:DescribeAvailabilityZones", "ec2:DescribeImages",
                    "ec2:DescribeInstances", "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
                    "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets"],
         "Resource": "*", "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
    ]}))
print(f"seeded AWS for cluster {cluster} in {region} (vpc {vpc_id})", file=sys.stderr)
