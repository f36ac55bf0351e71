package main

// The scenario's objects as this release's Go types, and the fake API server they are served
// from (controller-runtime's fake client, with the field indexes Karpenter's operator registers,
// core `pkg/operator/operator.go`).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awsoptions "github.com/aws/karpenter-provider-aws/pkg/operator/options"
)

type nodePoolObject struct {
	name string
	obj  *karpv1.NodePool
}

func (n *nodePoolObject) taints() []corev1.Taint { return n.obj.Spec.Template.Spec.Taints }

type scenarioObjects struct {
	nodeClass     *v1.EC2NodeClass
	nodePools     []*nodePoolObject
	daemonSets    []*appsv1.DaemonSet
	daemonSetPods []*corev1.Pod
	pendingPods   []*corev1.Pod
}

// decodeStrict decodes one object, refusing fields this release's type does not have: a field
// the release would drop is a scenario built for another release.
func decodeStrict(raw json.RawMessage, into any, what string) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("decoding %s as this release's type: %w", what, err)
	}
	return nil
}

func decode(s *Scenario) (*scenarioObjects, error) {
	o := &scenarioObjects{nodeClass: &v1.EC2NodeClass{}}
	if err := decodeStrict(s.NodeClass, o.nodeClass, "the EC2NodeClass"); err != nil {
		return nil, err
	}
	for i, raw := range s.NodePools {
		np := &karpv1.NodePool{}
		if err := decodeStrict(raw, np, fmt.Sprintf("nodePools[%d]", i)); err != nil {
			return nil, err
		}
		o.nodePools = append(o.nodePools, &nodePoolObject{name: np.Name, obj: np})
	}
	for i, raw := range s.DaemonSets {
		ds := &appsv1.DaemonSet{}
		if err := decodeStrict(raw, ds, fmt.Sprintf("daemonSets[%d]", i)); err != nil {
			return nil, err
		}
		o.daemonSets = append(o.daemonSets, ds)
	}
	for i, raw := range s.DaemonSetPods {
		p := &corev1.Pod{}
		if err := decodeStrict(raw, p, fmt.Sprintf("daemonSetPods[%d]", i)); err != nil {
			return nil, err
		}
		o.daemonSetPods = append(o.daemonSetPods, p)
	}
	for i, raw := range s.PendingPods {
		p := &corev1.Pod{}
		if err := decodeStrict(raw, p, fmt.Sprintf("pendingPods[%d]", i)); err != nil {
			return nil, err
		}
		o.pendingPods = append(o.pendingPods, pendingPod(p))
	}
	return o, nil
}

// fakeClient serves `objects` as an API server would, with the field indexes Karpenter's List
// calls select on.
func fakeClient(objects []client.Object) client.Client {
	nodeClaimRef := func(field func(*karpv1.NodeClassReference) string) client.IndexerFunc {
		return func(o client.Object) []string {
			ref := o.(*karpv1.NodeClaim).Spec.NodeClassRef
			if ref == nil {
				return nil
			}
			return []string{field(ref)}
		}
	}
	nodePoolRef := func(field func(*karpv1.NodeClassReference) string) client.IndexerFunc {
		return func(o client.Object) []string {
			ref := o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef
			if ref == nil {
				return nil
			}
			return []string{field(ref)}
		}
	}
	group := func(r *karpv1.NodeClassReference) string { return r.Group }
	kind := func(r *karpv1.NodeClassReference) string { return r.Kind }
	name := func(r *karpv1.NodeClassReference) string { return r.Name }
	return fakecr.NewClientBuilder().
		WithScheme(scheme.Scheme).
		// The plain tracker: Karpenter's calls here need no managed fields, and the field-managed
		// one builds a REST mapper of the whole scheme on every patch.
		WithObjectTracker(clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())).
		WithObjects(objects...).
		WithStatusSubresource(&karpv1.NodePool{}, &karpv1.NodeClaim{}, &v1.EC2NodeClass{}, &corev1.Pod{}, &corev1.Node{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string {
			return []string{o.(*corev1.Node).Spec.ProviderID}
		}).
		WithIndex(&storagev1.VolumeAttachment{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
		}).
		WithIndex(&karpv1.NodeClaim{}, "status.providerID", func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).
		WithIndex(&karpv1.NodeClaim{}, "spec.nodeClassRef.group", nodeClaimRef(group)).
		WithIndex(&karpv1.NodeClaim{}, "spec.nodeClassRef.kind", nodeClaimRef(kind)).
		WithIndex(&karpv1.NodeClaim{}, "spec.nodeClassRef.name", nodeClaimRef(name)).
		WithIndex(&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.group", nodePoolRef(group)).
		WithIndex(&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.kind", nodePoolRef(kind)).
		WithIndex(&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.name", nodePoolRef(name)).
		Build()
}

// withOptions parses Karpenter's settings from `env` with Karpenter's own options (core and AWS),
// as its operator does at start (core `pkg/operator/injection` `WithOptionsOrDie`), but answering
// an error instead of exiting. The environment is restored afterwards.
func withOptions(ctx context.Context, env map[string]string) (context.Context, error) {
	for k, v := range env {
		os.Setenv(k, v)
	}
	defer func() {
		for k := range env {
			os.Unsetenv(k)
		}
	}()
	fs := &coreoptions.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
	fs.SetOutput(discard{})
	injectables := []coreoptions.Injectable{&coreoptions.Options{}, &awsoptions.Options{}}
	for _, o := range injectables {
		o.AddFlags(fs)
	}
	for _, o := range injectables {
		if err := o.Parse(fs); err != nil {
			return nil, err
		}
	}
	for _, o := range injectables {
		ctx = o.ToContext(ctx)
	}
	// As the AWS provider's main does once its options are parsed.
	v1.CapacityReservationsEnabled = coreoptions.FromContext(ctx).FeatureGates.ReservedCapacity
	return ctx, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
