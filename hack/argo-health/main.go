// Command argo-health runs an Argo CD resource health check (a health.lua script)
// the way Argo CD does (github.com/argoproj/argo-cd util/lua/lua.go): gopher-lua with
// SkipOpenLibs, then only the package, base and table libraries and a "safe" os
// library opened (the default, resource.customizations.useOpenLibs off: no string,
// io or math library), the object as the global `obj`, a one-second time limit, and
// a returned table whose `status` must be one of Argo CD's health codes.
//
//	argo-health run <health.lua> <object.yaml|json>...   one JSON line per object:
//	                                                     {"file":…,"status":…,"message":…}
//	argo-health test <dir>                               runs <dir>/health_test.yaml (Argo CD's
//	                                                     format) against <dir>/health.lua; exit 1
//	                                                     on any mismatch
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// HealthStatus is Argo CD's health.HealthStatus as a health script returns it.
type HealthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

var validCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Healthy": true,
	"Suspended": true, "Degraded": true, "Missing": true,
}

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		if len(os.Args) < 4 {
			usage()
		}
		err = run(os.Args[2], os.Args[3:])
	case "test":
		err = test(os.Args[2])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "argo-health:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: argo-health run <health.lua> <object.yaml|json>... | argo-health test <dir with health.lua and health_test.yaml>")
	os.Exit(2)
}

func run(scriptPath string, objects []string) error {
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	for _, path := range objects {
		obj, err := readObject(path)
		if err != nil {
			return err
		}
		status, err := health(obj, string(script))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := out.Encode(map[string]string{"file": path, "status": status.Status, "message": status.Message}); err != nil {
			return err
		}
	}
	return nil
}

// healthTest is Argo CD's resource_customizations/<group>/<kind>/health_test.yaml.
type healthTest struct {
	Tests []struct {
		HealthStatus HealthStatus `json:"healthStatus"`
		InputPath    string       `json:"inputPath"`
	} `json:"tests"`
}

func test(dir string) error {
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		return err
	}
	var tests healthTest
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		return fmt.Errorf("%s/health_test.yaml: %w", dir, err)
	}
	if len(tests.Tests) == 0 {
		return fmt.Errorf("%s/health_test.yaml: no tests", dir)
	}
	failed := 0
	for _, t := range tests.Tests {
		obj, err := readObject(filepath.Join(dir, t.InputPath))
		if err != nil {
			return err
		}
		got, err := health(obj, string(script))
		if err != nil {
			return fmt.Errorf("%s: %w", t.InputPath, err)
		}
		if *got != t.HealthStatus {
			failed++
			fmt.Printf("FAIL %s: got %s %q, want %s %q\n", t.InputPath, got.Status, got.Message, t.HealthStatus.Status, t.HealthStatus.Message)
		} else {
			fmt.Printf("ok   %s: %s %q\n", t.InputPath, got.Status, got.Message)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d health tests failed", failed, len(tests.Tests))
	}
	return nil
}

func readObject(path string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj map[string]interface{}
	// YAML is converted to JSON first, as Argo CD's unstructured objects are decoded.
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("%s: no object", path)
	}
	return obj, nil
}

// health runs script with `obj` set, as Argo CD's VM.ExecuteHealthLua does.
func health(obj map[string]interface{}, script string) (*HealthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, openSafeOs},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.fn), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return nil, err
		}
	}
	l.PreloadModule(lua.OsLibName, safeOsLoader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, obj))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	ret := l.Get(-1)
	table, ok := ret.(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("health script returned %s, expected a table", ret.Type().String())
	}
	status := &HealthStatus{}
	if v, ok := table.RawGetString("status").(lua.LString); ok {
		status.Status = string(v)
	}
	if v, ok := table.RawGetString("message").(lua.LString); ok {
		status.Message = string(v)
	}
	if !validCodes[status.Status] {
		// What Argo CD shows for an invalid status code.
		return &HealthStatus{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return status, nil
}

// decodeValue converts a decoded JSON value into Lua values as Argo CD's decodeValue does.
func decodeValue(l *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case []interface{}:
		t := l.NewTable()
		for _, item := range v {
			t.Append(decodeValue(l, item))
		}
		return t
	case map[string]interface{}:
		t := l.NewTable()
		for key, item := range v {
			t.RawSetString(key, decodeValue(l, item))
		}
		return t
	default:
		return lua.LNil
	}
}

// The "safe" os library of Argo CD (util/lua/oslib_safe.go) offers only os.time and
// os.date; here os.time() is the current Unix time and os.date() an RFC 3339 UTC time
// (format arguments are ignored: the OLM health checks use neither).
func openSafeOs(l *lua.LState) int {
	l.Push(safeOsModule(l))
	return 1
}

func safeOsLoader(l *lua.LState) int {
	l.Push(safeOsModule(l))
	return 1
}

func safeOsModule(l *lua.LState) *lua.LTable {
	mod := l.RegisterModule(lua.OsLibName, map[string]lua.LGFunction{
		"time": func(l *lua.LState) int {
			l.Push(lua.LNumber(time.Now().Unix()))
			return 1
		},
		"date": func(l *lua.LState) int {
			l.Push(lua.LString(time.Now().UTC().Format(time.RFC3339)))
			return 1
		},
	}).(*lua.LTable)
	return mod
}
