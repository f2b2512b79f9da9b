// libcni-driver runs one CNI network config file the way containerd does (go-cni on top of libcni):
// a .conf file is loaded with ConfFromFile and wrapped with ConfListFromConf, anything else is loaded
// with ConfListFromFile, and the list is executed with libcni's *NetworkList calls on a CNIConfig built
// by NewCNIConfigWithCacheDir. It exists for the end-to-end tests of multus-ts.
//
// Usage:
//
//	libcni-driver <add|check|del|status|gc> --conf FILE --netns PATH --id CONTAINERID --ifname eth0
//	    --args 'K=V;K2=V2' --cache-dir DIR --path DIR:DIR [--cap-args JSON] [--valid-attachments JSON]
//
// ADD prints the result JSON to stdout. Any failure prints {"error": "...", "code": n} to stdout ("code"
// only when the error is a CNI *types.Error) and exits 1. Usage errors exit 2.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

type options struct {
	conf             string
	netns            string
	id               string
	ifname           string
	args             string
	cacheDir         string
	path             string
	capArgs          string
	validAttachments string
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: libcni-driver <add|check|del|status|gc> --conf FILE --netns PATH --id ID --ifname NAME "+
		"[--args 'K=V;...'] --cache-dir DIR --path DIR[:DIR...] [--cap-args JSON] [--valid-attachments JSON]")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet("libcni-driver "+cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.conf, "conf", "", "network config file (.conf, .conflist or .json)")
	fs.StringVar(&o.netns, "netns", "", "network namespace path")
	fs.StringVar(&o.id, "id", "", "container ID")
	fs.StringVar(&o.ifname, "ifname", "eth0", "interface name")
	fs.StringVar(&o.args, "args", "", "CNI_ARGS as K=V;K2=V2")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "libcni cache directory")
	fs.StringVar(&o.path, "path", "", "plugin search path, colon separated")
	fs.StringVar(&o.capArgs, "cap-args", "", "capability args as a JSON object")
	fs.StringVar(&o.validAttachments, "valid-attachments", "", "GC valid attachments as a JSON array of {containerID, ifname}")
	if err := fs.Parse(os.Args[2:]); err != nil {
		usage()
		os.Exit(2)
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		usage()
		os.Exit(2)
	}
	if o.conf == "" || o.cacheDir == "" || o.path == "" {
		fmt.Fprintln(os.Stderr, "--conf, --cache-dir and --path are required")
		usage()
		os.Exit(2)
	}

	out, err := run(cmd, &o)
	if err != nil {
		fail(err)
	}
	if out != nil {
		os.Stdout.Write(out)
		os.Stdout.Write([]byte("\n"))
	}
}

func fail(err error) {
	body := map[string]interface{}{"error": err.Error()}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		body["code"] = cniErr.Code
		body["msg"] = cniErr.Msg
		if cniErr.Details != "" {
			body["details"] = cniErr.Details
		}
	}
	b, _ := json.Marshal(body)
	os.Stdout.Write(b)
	os.Stdout.Write([]byte("\n"))
	os.Exit(1)
}

func loadList(file string) (*libcni.NetworkConfigList, error) {
	if filepath.Ext(file) == ".conf" {
		conf, err := libcni.ConfFromFile(file)
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", file, err)
		}
		list, err := libcni.ConfListFromConf(conf)
		if err != nil {
			return nil, fmt.Errorf("converting %s to a list: %w", file, err)
		}
		return list, nil
	}
	list, err := libcni.ConfListFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", file, err)
	}
	return list, nil
}

func parseArgs(s string) ([][2]string, error) {
	var pairs [][2]string
	if s == "" {
		return pairs, nil
	}
	for _, item := range strings.Split(s, ";") {
		if item == "" {
			continue
		}
		kv := strings.SplitN(item, "=", 2)
		if len(kv) != 2 {
			return nil, fmt.Errorf("invalid --args item %q (want K=V)", item)
		}
		pairs = append(pairs, [2]string{kv[0], kv[1]})
	}
	return pairs, nil
}

func run(cmd string, o *options) ([]byte, error) {
	list, err := loadList(o.conf)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range filepath.SplitList(o.path) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	cni := libcni.NewCNIConfigWithCacheDir(paths, o.cacheDir, nil)

	pairs, err := parseArgs(o.args)
	if err != nil {
		return nil, err
	}
	rt := &libcni.RuntimeConf{
		ContainerID: o.id,
		NetNS:       o.netns,
		IfName:      o.ifname,
		Args:        pairs,
	}
	if o.capArgs != "" {
		caps := map[string]interface{}{}
		if err := json.Unmarshal([]byte(o.capArgs), &caps); err != nil {
			return nil, fmt.Errorf("invalid --cap-args: %w", err)
		}
		rt.CapabilityArgs = caps
	}

	ctx := context.Background()
	switch cmd {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case "check":
		return nil, cni.CheckNetworkList(ctx, list, rt)
	case "del":
		return nil, cni.DelNetworkList(ctx, list, rt)
	case "status":
		return nil, cni.GetStatusNetworkList(ctx, list)
	case "gc":
		args := &libcni.GCArgs{}
		if o.validAttachments != "" {
			if err := json.Unmarshal([]byte(o.validAttachments), &args.ValidAttachments); err != nil {
				return nil, fmt.Errorf("invalid --valid-attachments: %w", err)
			}
		}
		return nil, cni.GCNetworkList(ctx, list, args)
	default:
		return nil, fmt.Errorf("unknown command %q (want add, check, del, status or gc)", cmd)
	}
}
