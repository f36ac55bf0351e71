//go:build karpenter_v1_8

package main

// Karpenter v1.8 wired as its controller wires it (aws/karpenter-provider-aws v1.8.6
// `cmd/controller/main.go`, core v1.8.2 `pkg/controllers/controllers.go` `NewControllers`).

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	nodepoolreadiness "sigs.k8s.io/karpenter/pkg/controllers/nodepool/readiness"
	nodepoolvalidation "sigs.k8s.io/karpenter/pkg/controllers/nodepool/validation"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
)

const release = "v1.8.6"

func newKarpenter(ctx context.Context, kube client.Client, clientset kubernetes.Interface, s *Scenario, o *scenarioObjects) (*karpenter, error) {
	env, err := awsEnvironment(ctx, kube, clientset, s, o)
	if err != nil {
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
		kube:              kube,
		cloudProvider:     cp,
		cluster:           cluster,
		provisioner:       provisioner,
		debug:             describeLaunches(env),
		reconcileNodePool: reconcileNodePool(validation, readiness),
	}, nil
}
