package main

// One scheduling round, as Karpenter's provisioner runs it (core `provisioning.Provisioner`
// `Schedule`, then `Create` and the NodeClaim lifecycle's launch through the cloud provider's
// `Create`), over a fresh fake cluster holding the scenario's objects.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	discoveryfake "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	corecloudprovider "sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
)

type schedulingNodeClaim = scheduling.NodeClaim

// karpenter is one release's provisioner and what it runs on.
type karpenter struct {
	kube          client.Client
	cloudProvider corecloudprovider.CloudProvider
	cluster       *state.Cluster
	provisioner   *provisioning.Provisioner
	// Karpenter's NodePool validation and readiness controllers, which decide whether the
	// provisioner uses a NodePool.
	reconcileNodePool func(context.Context, *karpv1.NodePool) error
	debug             func()
	// Launches go through the cloud provider one at a time: the AWS provider's fake EC2 API
	// checks, then pops, its record of launch templates in CreateFleet without holding its lock
	// across both (aws/karpenter-provider-aws `pkg/fake/ec2api.go`), so two CreateFleet batches
	// at once can panic the process with "index out of range [-1]".
	launching sync.Mutex
}

var discardRecorder = func() *record.FakeRecorder { return &record.FakeRecorder{} }

// run schedules the scenario's pending Pods with `pools` only (and, when there is one pool, its
// probe Pod), and launches each NodeClaim Karpenter decides on.
func run(ctx context.Context, s *Scenario, o *scenarioObjects, pools []*nodePoolObject) (outcomes, PodOutcome, error) {
	result := outcomes{pods: map[string]PodOutcome{}, skipped: map[string]string{}, offered: map[string]int{}}
	objects := []client.Object{o.nodeClass.DeepCopy()}
	for _, np := range pools {
		objects = append(objects, np.obj.DeepCopy())
	}
	for _, ds := range o.daemonSets {
		objects = append(objects, ds.DeepCopy())
	}
	for _, p := range o.daemonSetPods {
		objects = append(objects, p.DeepCopy())
	}
	for _, p := range o.pendingPods {
		objects = append(objects, p.DeepCopy())
	}
	var probe *corev1.Pod
	if len(pools) == 1 {
		probe = probePod(pools[0])
		objects = append(objects, probe.DeepCopy())
	}
	kube := fakeClient(objects)
	clientset := kubefake.NewSimpleClientset()
	clientset.Discovery().(*discoveryfake.FakeDiscovery).FakedServerVersion = serverVersion(s.KubernetesVersion)
	k, err := newKarpenter(ctx, kube, clientset, s, o)
	if err != nil {
		return result, PodOutcome{}, fmt.Errorf("building Karpenter: %w", err)
	}
	for _, ds := range o.daemonSets {
		if err := k.cluster.UpdateDaemonSet(ctx, ds.DeepCopy()); err != nil {
			return result, PodOutcome{}, fmt.Errorf("DaemonSet %s: %w", ds.Name, err)
		}
	}
	for _, np := range pools {
		latest := &karpv1.NodePool{}
		if err := kube.Get(ctx, types.NamespacedName{Name: np.name}, latest); err != nil {
			return result, PodOutcome{}, err
		}
		if err := k.reconcileNodePool(ctx, latest); err != nil {
			return result, PodOutcome{}, fmt.Errorf("NodePool %s status: %w", np.name, err)
		}
		if err := kube.Get(ctx, types.NamespacedName{Name: np.name}, latest); err != nil {
			return result, PodOutcome{}, err
		}
		if its, err := k.cloudProvider.GetInstanceTypes(ctx, latest); err == nil {
			result.offered[np.name] = len(its)
			if os.Getenv("ORACLE_DEBUG") != "" {
				for _, it := range its {
					for _, of := range it.Offerings {
						fmt.Fprintf(os.Stderr, "  %s %s %s %v avail=%v\n", it.Name, of.Zone(), of.CapacityType(), of.Price, of.Available)
					}
				}
			}
		}
		if os.Getenv("ORACLE_DEBUG") != "" {
			nc := o.nodeClass.DeepCopy()
			gerr := kube.Get(ctx, types.NamespacedName{Name: nc.Name}, nc)
			fmt.Fprintf(os.Stderr, "NodePool %s conditions: %+v\nNodeClass (%v) gen %d: %+v\n", np.name, latest.Status.Conditions, gerr, nc.Generation, nc.Status.Conditions)
		}
		if cond := latest.StatusConditions().Get("Ready"); cond == nil || !cond.IsTrue() {
			msg := "not ready"
			if cond != nil {
				msg = fmt.Sprintf("not ready: %s: %s", cond.Reason, cond.Message)
			}
			result.skipped[np.name] = msg
		}
	}
	// Pods Karpenter refuses before scheduling (Provisioner.Validate).
	pending := append([]*corev1.Pod{}, o.pendingPods...)
	if probe != nil {
		pending = append(pending, probe)
	}
	for _, p := range pending {
		if err := k.provisioner.Validate(ctx, p.DeepCopy()); err != nil {
			result.pods[podKey(p)] = PodOutcome{Ignored: err.Error()}
		}
	}
	results, err := k.provisioner.Schedule(ctx)
	if err != nil {
		return result, PodOutcome{}, fmt.Errorf("scheduling: %w", err)
	}
	for p, perr := range results.PodErrors {
		result.pods[podKey(p)] = PodOutcome{Error: perr.Error()}
	}
	// Created at once, as the provisioner creates them, and launched one after the other
	// (`karpenter.launching`).
	launchErrs := make([]error, len(results.NewNodeClaims))
	var wg sync.WaitGroup
	for i, nc := range results.NewNodeClaims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			launchErrs[i] = launch(ctx, k, nc)
		}()
	}
	wg.Wait()
	for i, nc := range results.NewNodeClaims {
		var names []string
		for _, it := range nc.InstanceTypeOptions {
			names = append(names, it.Name)
		}
		sort.Strings(names)
		launchErr := launchErrs[i]
		for _, p := range nc.Pods {
			out := PodOutcome{NodePool: nc.NodePoolName, InstanceTypes: names, Launched: launchErr == nil}
			if launchErr != nil {
				out.LaunchError = launchErr.Error()
			}
			result.pods[podKey(p)] = out
		}
	}
	for _, existing := range results.ExistingNodes {
		for _, p := range existing.Pods {
			result.pods[podKey(p)] = PodOutcome{NodePool: "(existing node)"}
		}
	}
	// A pending Pod Karpenter neither ignored nor decided on (no dynamic NodePool left).
	for _, p := range pending {
		if _, ok := result.pods[podKey(p)]; !ok {
			result.pods[podKey(p)] = PodOutcome{Error: "no decision (no NodePool was scheduled against)"}
		}
	}
	var probeOutcome PodOutcome
	if probe != nil {
		probeOutcome = result.pods[podKey(probe)]
		delete(result.pods, podKey(probe))
	}
	return result, probeOutcome, nil
}

// launch creates the NodeClaim as the provisioner does (which checks the NodePool's limits against
// its status), then launches it through the cloud provider as the NodeClaim lifecycle controller
// does.
func launch(ctx context.Context, k *karpenter, nc *schedulingNodeClaim) error {
	name, err := k.provisioner.Create(ctx, nc)
	if err != nil {
		return fmt.Errorf("creating the NodeClaim: %w", err)
	}
	created := &karpv1.NodeClaim{}
	if err := k.kube.Get(ctx, types.NamespacedName{Name: name}, created); err != nil {
		return fmt.Errorf("reading the NodeClaim back: %w", err)
	}
	if os.Getenv("ORACLE_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "nodeclaim reqs: %+v\n", created.Spec.Requirements)
	}
	k.launching.Lock()
	_, err = k.cloudProvider.Create(ctx, created)
	k.launching.Unlock()
	if err != nil {
		if k.debug != nil && os.Getenv("ORACLE_DEBUG") != "" {
			k.debug()
		}
		return fmt.Errorf("launching: %w", err)
	}
	return nil
}

func serverVersion(v string) *version.Info {
	if v == "" {
		v = "1.34"
	}
	major, minor, _ := strings.Cut(v, ".")
	return &version.Info{Major: major, Minor: minor, GitVersion: "v" + v + ".0"}
}
