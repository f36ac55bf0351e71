// Command oracle answers, with Karpenter's own code, what Karpenter does in a scenario: for each
// pending Pod, the NodePool and instance types it launches for it (or the error Karpenter gives),
// and for each NodePool alone, whether it can launch anything and which instance types are left
// after Karpenter's own filtering. It builds Karpenter as its controller is built
// (aws/karpenter-provider-aws `cmd/controller/main.go`: the AWS cloud provider, decorated by core's
// metrics and overlay wrappers, the cluster state, the provisioner) over controller-runtime's fake
// client and the AWS provider's own fake EC2 API (`pkg/fake`, `pkg/test.NewEnvironment`), fed with
// the scenario's instance types and offerings. No controller runs, no API server, no AWS.
//
// It reads one scenario per line (JSON) on stdin and writes one answer per line on stdout, so one
// process answers thousands of scenarios. Which Karpenter release it is built from is chosen at
// build time (`-modfile=releases/<release>.mod` and a build tag, see build.sh).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aws/karpenter-provider-aws/pkg/apis"
)

// Scenario is what the Rust side generates: Kubernetes objects as the API server serves them, and
// EC2's answers in a compact form.
type Scenario struct {
	Name string `json:"name"`
	// The Karpenter controller's environment (CLUSTER_NAME, FEATURE_GATES, MIN_VALUES_POLICY, ...),
	// parsed by Karpenter's own options.
	Env map[string]string `json:"env"`
	// The Kubernetes version the API server reports (`1.34`).
	KubernetesVersion string            `json:"kubernetesVersion"`
	NodeClass         json.RawMessage   `json:"nodeClass"`
	NodePools         []json.RawMessage `json:"nodePools"`
	DaemonSets        []json.RawMessage `json:"daemonSets"`
	// Running Pods of the DaemonSets (owned by them), the newest of which Karpenter counts.
	DaemonSetPods []json.RawMessage `json:"daemonSetPods"`
	PendingPods   []json.RawMessage `json:"pendingPods"`
	InstanceTypes []InstanceType    `json:"instanceTypes"`
}

// InstanceType is one of EC2's instance types as DescribeInstanceTypes and
// DescribeInstanceTypeOfferings describe it.
type InstanceType struct {
	Name                      string   `json:"name"`
	VCPUs                     int32    `json:"vcpus"`
	MemoryMiB                 int64    `json:"memoryMiB"`
	Architectures             []string `json:"architectures"`
	UsageClasses              []string `json:"usageClasses"`
	MaximumNetworkInterfaces  int32    `json:"maximumNetworkInterfaces"`
	IPv4AddressesPerInterface int32    `json:"ipv4AddressesPerInterface"`
	Hypervisor                string   `json:"hypervisor,omitempty"`
	BareMetal                 bool     `json:"bareMetal,omitempty"`
	Manufacturer              string   `json:"manufacturer,omitempty"`
	// The zones EC2 offers it in.
	Zones []string `json:"zones"`
}

// Answer is what Karpenter's code decided.
type Answer struct {
	Name    string `json:"name"`
	Release string `json:"release"`
	// The scenario could not be run (Karpenter would not start with these settings, an object
	// does not decode as this release's type).
	Error string `json:"error,omitempty"`
	// Every pending Pod, with every NodePool of the scenario.
	Pods map[string]PodOutcome `json:"pods"`
	// Each NodePool alone (the others removed): whether a Pod that tolerates its taints and asks
	// for nothing launches a node, and what happens to each pending Pod.
	NodePools map[string]NodePoolOutcome `json:"nodePools"`
}

// PodOutcome is Karpenter's decision for one Pod.
type PodOutcome struct {
	// Karpenter skipped the Pod before scheduling (Provisioner.Validate), with why.
	Ignored string `json:"ignored,omitempty"`
	// The NodePool of the NodeClaim the scheduler put it on.
	NodePool string `json:"nodePool,omitempty"`
	// The instance types that NodeClaim allows, sorted.
	InstanceTypes []string `json:"instanceTypes,omitempty"`
	// The scheduler's error for it.
	Error string `json:"error,omitempty"`
	// The NodeClaim was created and the AWS provider launched an instance for it.
	Launched bool `json:"launched"`
	// Why the NodeClaim was not created or not launched.
	LaunchError string `json:"launchError,omitempty"`
	// The round it launched in, when not the first.
	Attempts int `json:"attempts,omitempty"`
}

// NodePoolOutcome is what one NodePool does alone.
type NodePoolOutcome struct {
	// The NodePool was left out of scheduling (not ready, no instance types), with Karpenter's
	// words.
	Skipped string `json:"skipped,omitempty"`
	// The probe: a Pod that tolerates the NodePool's taints and requests nothing.
	Probe PodOutcome `json:"probe"`
	// The instance types GetInstanceTypes gives the NodePool before its requirements.
	Offered int `json:"offered"`
	// Each pending Pod with this NodePool alone.
	Pods map[string]PodOutcome `json:"pods"`
}

// crdsAnswer answers the query `{"crds": true}`: the release's own CRDs (the AWS provider's
// `pkg/apis/crds`), which the Rust side installs in its facts as the cluster would hold them.
type crdsAnswer struct {
	CRDs []*apiextensionsv1.CustomResourceDefinition `json:"crds"`
}

const probeNamespace = "karpenter-health-oracle"
const probeName = "probe"

func main() {
	// Karpenter logs through controller-runtime's logger; its words reach the answer through
	// errors, not logs.
	ctrllog.SetLogger(logr.Discard())
	// Each round builds and drops a cluster; memory is plentiful, collections are not free.
	debug.SetGCPercent(400)
	// ORACLE_CPUPROFILE=<file> profiles a run (docs/benchmarks.md).
	if path := os.Getenv("ORACLE_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var answer any = crdsAnswer{CRDs: apis.CRDs}
			var query struct {
				CRDs bool `json:"crds"`
			}
			if json.Unmarshal(line, &query); !query.CRDs {
				answer = answerOne(line)
			}
			encoded, _ := json.Marshal(answer)
			out.Write(encoded)
			out.WriteByte('\n')
			out.Flush()
		}
		if err == io.EOF {
			pprof.StopCPUProfile()
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "oracle: reading stdin: %v\n", err)
			os.Exit(1)
		}
	}
}

// answerOne never panics: a panic in Karpenter's code is an answer too (the Rust side reports it).
func answerOne(line []byte) (answer Answer) {
	answer.Release = release
	defer func() {
		if r := recover(); r != nil {
			answer.Error = fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	var s Scenario
	if err := json.Unmarshal(line, &s); err != nil {
		answer.Error = fmt.Sprintf("decoding the scenario: %v", err)
		return answer
	}
	answer.Name = s.Name
	objects, err := decode(&s)
	if err != nil {
		answer.Error = err.Error()
		return answer
	}
	ctx, err := withOptions(context.Background(), s.Env)
	if err != nil {
		answer.Error = fmt.Sprintf("Karpenter's options: %v", err)
		return answer
	}
	// Each round has a cluster of its own, so they run at once: a round spends most of its time
	// waiting out the AWS provider's CreateFleet batching window, not computing.
	type round struct {
		outcomes outcomes
		probe    PodOutcome
		err      error
	}
	rounds := make([]round, len(objects.nodePools)+1)
	var wg sync.WaitGroup
	for i := range rounds {
		// With one NodePool, every Pod's round with all NodePools is its round alone.
		if i == 0 && len(objects.nodePools) == 1 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					rounds[i].err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			pools := objects.nodePools
			if i > 0 {
				pools = []*nodePoolObject{objects.nodePools[i-1]}
			}
			rounds[i].outcomes, rounds[i].probe, rounds[i].err = runUntilLaunched(ctx, &s, objects, pools)
		}()
	}
	wg.Wait()
	if len(objects.nodePools) == 1 {
		rounds[0] = rounds[1]
	}
	if rounds[0].err != nil {
		answer.Error = rounds[0].err.Error()
		return answer
	}
	answer.Pods = rounds[0].outcomes.pods
	answer.NodePools = map[string]NodePoolOutcome{}
	for i, np := range objects.nodePools {
		alone := rounds[i+1]
		if alone.err != nil {
			answer.Error = fmt.Sprintf("NodePool %s alone: %v", np.name, alone.err)
			return answer
		}
		answer.NodePools[np.name] = NodePoolOutcome{
			Skipped: alone.outcomes.skipped[np.name],
			Probe:   alone.probe,
			Offered: alone.outcomes.offered[np.name],
			Pods:    alone.outcomes.pods,
		}
	}
	return answer
}

// attempts is how many rounds a Pod nothing launched for is given. Karpenter's decision can
// differ from round to round for the same cluster (it iterates Go maps: instance types, daemon
// overhead groups), and it schedules a waiting Pod again every round, so a Pod it launches for in
// any round does not wait forever.
const attempts = 3

// mayDiffer says whether another round may launch for a Pod nothing launched for: where the
// outcome hangs on which DaemonSets count on which instance types (Karpenter relaxes a
// DaemonSet's required terms on a Pod object shared across instance types it iterates from a
// map, scheduler.go isDaemonPodCompatible), which decides the types' room and so the types a
// NodeClaim offers at launch. A Pod refused before scheduling, or refused for its requirements,
// taints or limits, is refused the same way every round.
func mayDiffer(p PodOutcome) bool {
	if p.Launched || p.Ignored != "" {
		return false
	}
	return p.LaunchError != "" || strings.Contains(p.Error, "enough resources")
}

// runUntilLaunched runs rounds until every Pod (and the probe) launched or `attempts` rounds ran,
// keeping for each Pod its first launch, else its first round's outcome.
func runUntilLaunched(ctx context.Context, s *Scenario, o *scenarioObjects, pools []*nodePoolObject) (outcomes, PodOutcome, error) {
	first, probe, err := run(ctx, s, o, pools)
	if err != nil {
		return first, probe, err
	}
	for attempt := 1; attempt < attempts; attempt++ {
		waiting := len(pools) == 1 && mayDiffer(probe)
		for _, p := range first.pods {
			waiting = waiting || mayDiffer(p)
		}
		if !waiting {
			break
		}
		again, againProbe, err := run(ctx, s, o, pools)
		if err != nil {
			return first, probe, err
		}
		for k, p := range again.pods {
			if p.Launched && !first.pods[k].Launched {
				p.Attempts = attempt + 1
				first.pods[k] = p
			}
		}
		if againProbe.Launched && !probe.Launched {
			againProbe.Attempts = attempt + 1
			probe = againProbe
		}
	}
	return first, probe, nil
}

// outcomes of one scheduling round.
type outcomes struct {
	pods    map[string]PodOutcome
	skipped map[string]string
	offered map[string]int
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// probePod tolerates exactly the NodePool's taints (not its startup taints, which the scheduler
// does not weigh) and asks for nothing: whatever Karpenter needs to launch for it, it needs for
// any Pod of the NodePool.
func probePod(np *nodePoolObject) *corev1.Pod {
	var tolerations []corev1.Toleration
	for _, t := range np.taints() {
		tolerations = append(tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect,
		})
	}
	return pendingPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: probeName, UID: "probe-uid"},
		Spec: corev1.PodSpec{
			Tolerations: tolerations,
			Containers:  []corev1.Container{{Name: "probe", Image: "probe"}},
		},
	})
}

// pendingPod marks a Pod as the scheduler leaves one it could not place, which is what Karpenter
// provisions for (`pod.IsProvisionable`: unscheduled, `PodScheduled=False` with reason
// `Unschedulable`).
func pendingPod(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeName = ""
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	}}
	if p.CreationTimestamp.IsZero() {
		p.CreationTimestamp = metav1.Now()
	}
	return p
}

func sortedNames(names []string) []string {
	sort.Strings(names)
	return names
}
