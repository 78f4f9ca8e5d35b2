package main

// The "webhook" mode: an operator's webhook server as OLM bundles declare them. It
// serves HTTPS on :9443 (LISTEN_TLS) with the certificate OLM mounts into webhook
// deployments (CERT_DIR, default /tmp/k8s-webhook-server/serving-certs, files tls.crt
// and tls.key), plus /healthz and /readyz on :8080 (LISTEN) in plain HTTP:
//
//	/validate  AdmissionReview v1: denies an object labelled deny=true, with a message
//	/mutate    AdmissionReview v1: adds the label mutated-by=testimage (JSONPatch)
//	/convert   ConversionReview v1 between <group>/v1 (spec.size) and <group>/v2
//	           (spec.replicas): the field is renamed, everything else is kept

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

const (
	// DenyMessage is what /validate answers for an object labelled deny=true.
	DenyMessage = "denied by the testimage webhook: the object has the label deny=true"
	// MutatedLabel is the label /mutate adds (value "testimage").
	MutatedLabel = "mutated-by"
)

func webhook(stop chan os.Signal) {
	dir := os.Getenv("CERT_DIR")
	if dir == "" {
		dir = "/tmp/k8s-webhook-server/serving-certs"
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook: loading the serving certificate:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", review(validate))
	mux.HandleFunc("/mutate", review(mutate))
	mux.HandleFunc("/convert", convertHandler)
	addr := os.Getenv("LISTEN_TLS")
	if addr == "" {
		addr = ":9443"
	}
	srv := &http.Server{Addr: addr, Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	fmt.Println("testimage webhooks serving HTTPS on", addr)
	serve(stop)
	_ = srv.Close()
}

type object = map[string]any

// review decodes an AdmissionReview, lets decide fill the response and answers.
func review(decide func(req object, resp object)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in object
		if !decode(w, r, &in) {
			return
		}
		req, _ := in["request"].(object)
		if req == nil {
			http.Error(w, "AdmissionReview without request", http.StatusBadRequest)
			return
		}
		resp := object{"uid": req["uid"], "allowed": true}
		decide(req, resp)
		fmt.Printf("admission %s %v: allowed=%v\n", r.URL.Path, req["operation"], resp["allowed"])
		answer(w, object{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
	}
}

func labelsOf(obj object) object {
	meta, _ := obj["metadata"].(object)
	labels, _ := meta["labels"].(object)
	return labels
}

func validate(req object, resp object) {
	obj, _ := req["object"].(object)
	if labelsOf(obj)["deny"] == "true" {
		resp["allowed"] = false
		resp["status"] = object{"code": 403, "reason": "Forbidden", "message": DenyMessage}
	}
}

func mutate(req object, resp object) {
	obj, _ := req["object"].(object)
	var patch []object
	if labelsOf(obj) == nil {
		patch = []object{{"op": "add", "path": "/metadata/labels", "value": object{MutatedLabel: "testimage"}}}
	} else {
		patch = []object{{"op": "add", "path": "/metadata/labels/" + MutatedLabel, "value": "testimage"}}
	}
	raw, _ := json.Marshal(patch)
	resp["patchType"] = "JSONPatch"
	resp["patch"] = raw // []byte: base64 in JSON, as the API requires
}

func convertHandler(w http.ResponseWriter, r *http.Request) {
	var in object
	if !decode(w, r, &in) {
		return
	}
	req, _ := in["request"].(object)
	if req == nil {
		http.Error(w, "ConversionReview without request", http.StatusBadRequest)
		return
	}
	desired, _ := req["desiredAPIVersion"].(string)
	objects, _ := req["objects"].([]any)
	converted := make([]any, 0, len(objects))
	result := object{"status": "Success"}
	for _, o := range objects {
		obj, _ := o.(object)
		if err := convert(obj, desired); err != nil {
			result = object{"status": "Failure", "message": err.Error()}
			converted = nil
			break
		}
		converted = append(converted, obj)
	}
	fmt.Printf("conversion of %d objects to %s: %v\n", len(objects), desired, result["status"])
	answer(w, object{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"response": object{"uid": req["uid"], "convertedObjects": converted, "result": result},
	})
}

// convert rewrites obj in place to desired: v1 spec.size <-> v2 spec.replicas.
func convert(obj object, desired string) error {
	from, _ := obj["apiVersion"].(string)
	fromGroup, fromVersion, _ := strings.Cut(from, "/")
	toGroup, toVersion, _ := strings.Cut(desired, "/")
	if fromGroup != toGroup {
		return fmt.Errorf("cannot convert %s to %s", from, desired)
	}
	spec, _ := obj["spec"].(object)
	rename := func(old, new string) {
		if spec == nil {
			return
		}
		if v, ok := spec[old]; ok {
			delete(spec, old)
			spec[new] = v
		}
	}
	switch {
	case fromVersion == toVersion:
	case fromVersion == "v1" && toVersion == "v2":
		rename("size", "replicas")
	case fromVersion == "v2" && toVersion == "v1":
		rename("replicas", "size")
	default:
		return fmt.Errorf("unknown conversion %s -> %s", from, desired)
	}
	obj["apiVersion"] = desired
	return nil
}

func decode(w http.ResponseWriter, r *http.Request, into *object) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err == nil {
		err = json.Unmarshal(body, into)
	}
	if err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func answer(w http.ResponseWriter, v object) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
