// Command controller runs cert-manager's certificate controllers for the test
// environment: Certificates, CertificateRequests (approver, SelfSigned and CA signers),
// Issuers and ClusterIssuers, from the cert-manager Go module's own controller
// packages. cert-manager publishes its controller binary's package (cmd/controller)
// as a module that cannot be fetched from the Go module proxy (its module path does
// not match its directory), so this program does what that binary's start-up does
// for the parts tests need: build cert-manager's controller context from a
// kubeconfig, construct the registered controllers, start the informers, run.
//
// Left out on purpose: ACME, Vault and Venafi issuers (no outside services in
// tests), the ingress/gateway shims, metrics and health servers, and leader
// election (one process per test control plane).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Controllers register themselves with controllerpkg in their init functions.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// Issuer implementations register with pkg/issuer the same way.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager controller: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	klog.InitFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server to work against")
	master := fs.String("master", "", "API server address (overrides the kubeconfig's)")
	namespace := fs.String("namespace", "", "namespace to watch (empty: all)")
	clusterResourceNamespace := fs.String("cluster-resource-namespace", "kube-system",
		"namespace of the Secrets ClusterIssuers refer to")
	leaderElect := fs.Bool("leader-elect", false,
		"accepted for cert-manager compatibility; only false is supported (one process per control plane)")
	workers := fs.Int("concurrent-workers", 5, "workers per controller")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *leaderElect {
		return errors.New("--leader-elect=true is not supported by this build: run one process per control plane with --leader-elect=false")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := logf.Log.WithName("controller")
	ctx = logf.NewContext(ctx, log)

	opts := controllerpkg.ContextOptions{
		APIServerHost:      *master,
		Kubeconfig:         *kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          *namespace,
		IssuerOptions: controllerpkg.IssuerOptions{
			ClusterResourceNamespace: *clusterResourceNamespace,
		},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controllerpkg.SchedulerOptions{MaxConcurrentChallenges: 60},
	}
	factory, err := controllerpkg.NewContextFactory(ctx, opts)
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}

	known := controllerpkg.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names)
	controllers := make([]controllerpkg.Interface, 0, len(names))
	for _, name := range names {
		c, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("constructing controller %s: %w", name, err)
		}
		log.Info("starting controller", "controller", name)
		controllers = append(controllers, c)
	}

	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.SharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	for i, c := range controllers {
		wg.Add(1)
		go func(name string, c controllerpkg.Interface) {
			defer wg.Done()
			if err := c.Run(*workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
				stop()
			}
		}(names[i], c)
	}
	wg.Wait()
	close(errs)
	logf.FlushLogs()
	return <-errs
}
