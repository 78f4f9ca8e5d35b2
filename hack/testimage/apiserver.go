package main

// The "apiserver" mode: an aggregated API server as OLM bundles declare them in
// spec.apiservicedefinitions.owned. It serves HTTPS on :6443 (LISTEN_TLS) with the
// certificate OLM mounts into APIService deployments (CERT_DIR, default
// /apiserver.local.config/certificates, files apiserver.crt and apiserver.key), plus
// /healthz and /readyz on :8080 (LISTEN) in plain HTTP. The group and version come
// from API_GROUP and API_VERSION (default widgets.example.com and v1alpha1):
//
//	/apis                                  APIGroupList with the one group
//	/apis/<group>                          APIGroup
//	/apis/<group>/<version>                APIResourceList: namespaced widgets, get/list
//	/apis/<group>/<version>/namespaces/<ns>/widgets   a WidgetList of one Widget
//	/apis/<group>/<version>/widgets        the same, across namespaces (ns "default")
//	/healthz, /readyz                      ok (over HTTPS too, for the API server)
//
// It trusts every caller: the test only shows that the API server reaches it.

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// ServedWidget is the name of the one Widget every list holds.
const ServedWidget = "served-by-testimage"

func apiserver(stop chan os.Signal) {
	dir := os.Getenv("CERT_DIR")
	if dir == "" {
		dir = "/apiserver.local.config/certificates"
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiserver: loading the serving certificate:", err)
		os.Exit(1)
	}
	group, version := envOr("API_GROUP", "widgets.example.com"), envOr("API_VERSION", "v1alpha1")
	addr := envOr("LISTEN_TLS", ":6443")
	srv := &http.Server{Addr: addr, Handler: aggregated(group, version), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	fmt.Printf("testimage aggregated API server for %s/%s serving HTTPS on %s\n", group, version, addr)
	serve(stop)
	_ = srv.Close()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// aggregated answers the discovery and widgets paths of group/version.
func aggregated(group, version string) http.Handler {
	gv := group + "/" + version
	groupDoc := object{
		"kind": "APIGroup", "apiVersion": "v1", "name": group,
		"versions":         []object{{"groupVersion": gv, "version": version}},
		"preferredVersion": object{"groupVersion": gv, "version": version},
	}
	base := "/apis/" + gv
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		fmt.Printf("apiserver %s %s\n", r.Method, r.URL.Path)
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch {
		case path == "/healthz" || path == "/readyz":
			fmt.Fprintln(w, "ok")
		case path == "/apis":
			answer(w, object{"kind": "APIGroupList", "apiVersion": "v1", "groups": []object{groupDoc}})
		case path == "/apis/"+group:
			answer(w, groupDoc)
		case path == base:
			answer(w, object{
				"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
				"resources": []object{{"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": []string{"get", "list"}}},
			})
		case path == base+"/widgets":
			answer(w, widgetList(gv, "default"))
		case strings.HasPrefix(path, base+"/namespaces/") && strings.HasSuffix(path, "/widgets"):
			ns := strings.TrimSuffix(strings.TrimPrefix(path, base+"/namespaces/"), "/widgets")
			if ns == "" || strings.Contains(ns, "/") {
				http.NotFound(w, r)
				return
			}
			answer(w, widgetList(gv, ns))
		default:
			http.NotFound(w, r)
		}
	})
}

func widgetList(gv, ns string) object {
	return object{
		"kind": "WidgetList", "apiVersion": gv,
		"metadata": object{"resourceVersion": "1"},
		"items": []object{{
			"kind": "Widget", "apiVersion": gv,
			"metadata": object{"name": ServedWidget, "namespace": ns, "resourceVersion": "1", "uid": "00000000-0000-0000-0000-000000000001"},
			"spec":     object{"size": 1},
		}},
	}
}
