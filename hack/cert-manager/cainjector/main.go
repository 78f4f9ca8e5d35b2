// Command cainjector runs cert-manager's CA injector for the test environment: it
// copies the CA of a Certificate's Secret (annotation cert-manager.io/inject-ca-from)
// or of a Secret (cert-manager.io/inject-ca-from-secret) into the caBundle of
// webhook configurations, CRD conversion webhooks and APIServices, using the
// cert-manager Go module's own injector package (pkg/controller/cainjector) on a
// controller-runtime manager, as cert-manager's cainjector binary does. That binary's
// package (cmd/cainjector) cannot be fetched from the Go module proxy (see
// ../controller). No leader election, no metrics server: one process per test
// control plane.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager cainjector: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("cainjector", flag.ContinueOnError)
	klog.InitFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server to work against")
	namespace := fs.String("namespace", "", "namespace to watch (empty: all)")
	leaderElect := fs.Bool("leader-elect", false,
		"accepted for cert-manager compatibility; only false is supported (one process per control plane)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *leaderElect {
		return errors.New("--leader-elect=true is not supported by this build: run one process per control plane with --leader-elect=false")
	}
	if *kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", *kubeconfig, err)
	}
	restConfig.UserAgent = "cert-manager-cainjector"

	log := logf.Log.WithName("cainjector")
	ctrl.SetLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, log)

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// As cert-manager's cainjector: Secrets are read directly (only their
		// metadata is watched), not cached with their data.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    *namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			"mutatingwebhookconfiguration":   true,
			"validatingwebhookconfiguration": true,
			"apiservice":                     true,
			"customresourcedefinition":       true,
		},
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	log.Info("starting")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running: %w", err)
	}
	logf.FlushLogs()
	return nil
}
