//go:build karpenter_v1_14

package main

// Karpenter v1.14 wired as its controller wires it (aws/karpenter-provider-aws v1.14.1
// `cmd/controller/main.go`, core `pkg/controllers/controllers.go` `NewControllers`).

import (
	"context"

	"github.com/samber/lo"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers/dynamicresources/deviceallocation"
	nodepoolreadiness "sigs.k8s.io/karpenter/pkg/controllers/nodepool/readiness"
	nodepoolvalidation "sigs.k8s.io/karpenter/pkg/controllers/nodepool/validation"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/state/virtualpods"

	"github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
)

const release = "v1.14.1"

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
		env.PlacementGroupProvider,
		env.InstanceTypeStore,
		lo.ToPtr("Y2EtYnVuZGxlCg=="),
	)
	cp := overlay.Decorate(metrics.Decorate(aws), kube, env.InstanceTypeStore)
	clk := clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cp)
	provisioner := provisioning.NewProvisioner(kube, recorder, cp, cluster, clk,
		deviceallocation.NewController(kube), virtualpods.NewVirtualPodCache(kube))
	validation := nodepoolvalidation.NewController(clk, kube, cp)
	readiness := nodepoolreadiness.NewController(clk, kube, cp)
	return &karpenter{
		kube:              kube,
		cloudProvider:     cp,
		cluster:           cluster,
		provisioner:       provisioner,
		debug:             describeLaunches(env),
		reconcileNodePool: reconcileNodePool(validation, readiness),
	}, nil
}
