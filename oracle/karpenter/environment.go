package main

// What both releases' wirings share: the AWS provider's own test environment fed the scenario's
// EC2 answers, the NodePool controllers the provisioner waits for, and the debug print of the
// launches the provider asked EC2 for.

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	coretest "sigs.k8s.io/karpenter/pkg/test"

	awstest "github.com/aws/karpenter-provider-aws/pkg/test"
)

// awsEnvironment starts the AWS provider's test environment (`pkg/test.NewEnvironment`) with the
// scenario's instance types, offerings, subnets and spot prices, its providers updated as the
// controller's instance-type and pricing controllers update them at start.
func awsEnvironment(ctx context.Context, kube client.Client, clientset kubernetes.Interface, s *Scenario, o *scenarioObjects) (*awstest.Environment, error) {
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
	return env, nil
}

// nodePoolReconciler is Karpenter's NodePool validation or readiness controller.
type nodePoolReconciler interface {
	Reconcile(context.Context, *karpv1.NodePool) (reconcile.Result, error)
}

// reconcileNodePool runs the NodePool controllers that decide whether the provisioner uses it.
func reconcileNodePool(validation, readiness nodePoolReconciler) func(context.Context, *karpv1.NodePool) error {
	return func(ctx context.Context, np *karpv1.NodePool) error {
		if _, err := validation.Reconcile(ctx, np); err != nil {
			return err
		}
		_, err := readiness.Reconcile(ctx, np)
		return err
	}
}

// describeLaunches prints (for ORACLE_DEBUG) the launch templates and fleets the provider asked
// the fake EC2 API for.
func describeLaunches(env *awstest.Environment) func() {
	return func() {
		fmt.Fprintf(os.Stderr, "create LT calls: %d\n", env.EC2API.CreateLaunchTemplateBehavior.CalledWithInput.Len())
		env.EC2API.CreateLaunchTemplateBehavior.CalledWithInput.ForEach(func(i *ec2.CreateLaunchTemplateInput) {
			fmt.Fprintf(os.Stderr, "  LT %s image %v\n", *i.LaunchTemplateName, i.LaunchTemplateData.ImageId)
		})
		fmt.Fprintf(os.Stderr, "fleet calls: %d\n", env.EC2API.CreateFleetBehavior.CalledWithInput.Len())
	}
}
