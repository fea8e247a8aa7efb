// Command kube is one multi-call binary holding Kubernetes' own control plane, as k3s and the old
// hyperkube do: the first argument picks kube-apiserver, kube-controller-manager, kube-scheduler,
// etcd or metrics-server (sigs.k8s.io/metrics-server, what serves metrics.k8s.io on GKE), and the
// rest are that command's own flags. It links the five once instead of five times.
//
// Nothing here re-implements Kubernetes: each entry is the upstream command's constructor.
// docs/local-cluster.md says how the local stack runs it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
	_ "time/tzdata" // CronJob time zones, as the upstream mains import it

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	jobcontroller "k8s.io/kubernetes/pkg/controller/job"
	metricsserver "sigs.k8s.io/metrics-server/cmd/metrics-server/app"
)

// jobBackOffEnv is the one named test setting: the Job controller's pod-failure back-off
// (10 s doubling to 10 min upstream), shortened the way Kubernetes' own integration tests do.
const jobBackOffEnv = "CAVE_TEST_JOB_POD_FAILURE_BACKOFF_SECONDS"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	name := filepath.Base(os.Args[1])
	args := append([]string{name}, os.Args[2:]...)
	// Each command sees itself as its upstream binary: client-go builds the user agent, and so
	// the field manager named in managedFields, from os.Args[0].
	os.Args = args
	switch name {
	case "kube-apiserver":
		run(apiserver.NewAPIServerCommand(), args)
	case "kube-controller-manager":
		applyTestSettings()
		run(controllermanager.NewControllerManagerCommand(), args)
	case "kube-scheduler":
		run(scheduler.NewSchedulerCommand(), args)
	case "metrics-server":
		// The signal handler upstream's main gives the command (one per process).
		run(metricsserver.NewMetricsServerCommand(genericapiserver.SetupSignalHandler()), args)
	case "etcd":
		etcdmain.Main(args)
	default:
		usage()
	}
}

func run(cmd *cobra.Command, args []string) {
	cmd.SetArgs(args[1:])
	os.Exit(cli.Run(cmd))
}

func applyTestSettings() {
	value := os.Getenv(jobBackOffEnv)
	if value == "" {
		return
	}
	seconds, err := strconv.ParseFloat(value, 64)
	if err != nil || seconds <= 0 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a positive number of seconds\n", jobBackOffEnv, value)
		os.Exit(2)
	}
	jobcontroller.DefaultJobPodFailureBackOff = time.Duration(seconds * float64(time.Second))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kube {kube-apiserver|kube-controller-manager|kube-scheduler|etcd|metrics-server} [flags]")
	os.Exit(2)
}
