// Command whereabouts-reconcile runs whereabouts' IP reconciler once: the job its ip-control-loop schedules
// (pkg/reconciler: ReconcileIPPools, then ReconcileOverlappingIPAddresses), with a kubeconfig instead of the
// in-cluster config. It removes the reservations whose pod is gone or whose pod's network-status does not list
// the reserved IP, and prints the removed IPs as JSON: {"cleaned": ["10.0.0.5", ...]}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/k8snetworkplumbingwg/whereabouts/pkg/logging"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/reconciler"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/storage/kubernetes"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	level := flag.String("log-level", "error", "whereabouts' log level on stderr (debug, verbose, error)")
	flag.Parse()
	logging.SetLogStderr(true)
	logging.SetLogLevel(*level)
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "whereabouts-reconcile: --kubeconfig is required")
		os.Exit(2)
	}
	client, err := kubernetes.NewClientViaKubeconfig(*kubeconfig)
	if err != nil {
		fail(err)
	}
	looper, err := reconciler.NewReconcileLooperWithClient(client)
	if err != nil {
		fail(err)
	}
	cleaned, err := looper.ReconcileIPPools()
	if err != nil {
		fail(err)
	}
	if err := looper.ReconcileOverlappingIPAddresses(); err != nil {
		fail(err)
	}
	ips := []string{}
	for _, ip := range cleaned {
		ips = append(ips, ip.String())
	}
	out, _ := json.Marshal(map[string][]string{"cleaned": ips})
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "whereabouts-reconcile: %v\n", err)
	os.Exit(1)
}
