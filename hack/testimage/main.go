// Command testimage is the one program inside the test node's images (built by
// hack/node-images.sh, never shipped): the pod sandbox ("pause"), and a tiny operator
// stand-in that really runs ("serve"): it answers /healthz and /readyz on :8080 and
// keeps running until SIGTERM. READY=false makes /readyz fail, so a readiness probe
// never passes; when READY_FILE is set, /readyz passes once that file exists;
// READY_AFTER=<seconds> makes it pass only that long after the start.
// "get URL" fetches URL (names resolved through the pod's DNS) and exits 0 on a 2xx.
// "webhook" serves admission and conversion webhooks over HTTPS besides what "serve"
// does (webhook.go). "apiserver" serves an aggregated API over HTTPS besides what
// "serve" does (apiserver.go).
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	mode := "serve"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch mode {
	case "pause":
		// The sandbox holds the pod's namespaces; reap children like the real pause.
		signal.Ignore(syscall.SIGCHLD)
		<-stop
	case "serve":
		serve(stop)
	case "webhook":
		webhook(stop)
	case "apiserver":
		apiserver(stop)
	case "get":
		if len(os.Args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: testimage get URL")
			os.Exit(2)
		}
		os.Exit(get(os.Args[2]))
	default:
		fmt.Fprintf(os.Stderr, "usage: testimage pause|serve|webhook|apiserver|get URL\n")
		os.Exit(2)
	}
}

var started = time.Now()

func ready() bool {
	if os.Getenv("READY") == "false" {
		return false
	}
	if after, err := strconv.Atoi(os.Getenv("READY_AFTER")); err == nil && time.Since(started) < time.Duration(after)*time.Second {
		return false
	}
	if f := os.Getenv("READY_FILE"); f != "" {
		_, err := os.Stat(f)
		return err == nil
	}
	return true
}

func serve(stop chan os.Signal) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	addr := os.Getenv("LISTEN")
	if addr == "" {
		addr = ":8080"
	}
	srv := &http.Server{Addr: addr, Handler: mux}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	fmt.Println("testimage serving on", addr)
	<-stop
	_ = srv.Close()
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	fmt.Println(url, resp.Status)
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}
