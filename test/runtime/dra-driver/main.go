// dra-driver: a small DRA driver of multus-ts' kubelet tier (test/runtime/kubelet-suite.ts; docs/archive/kubernetes-tests.md,
// "DRA"). It uses the kubelet plugin helper of k8s.io/dynamic-resource-allocation at the tests' Kubernetes
// release: it registers with kubelet (plugins_registry), serves the DRA gRPC service, and publishes one
// ResourceSlice for its node with fake NICs that carry Multus' attributes k8s.cni.cncf.io/deviceID and
// k8s.cni.cncf.io/resourceName, and one GPU-like device without them.
//
// NodePrepareResources gives no CDI devices (nothing is injected into containers); for each allocated NIC it
// writes the device plugin device-info file Multus copies for a (resourceName, deviceID) pair
// (/run/k8s.cni.cncf.io/devinfo/dp/<resource>-<id>-device.json, as SR-IOV's device plugin does), and
// NodeUnprepareResources removes it (the prepared claims are kept in <plugin dir>/claims/<uid>.json, so that
// a restarted driver still knows them). Every prepare and unprepare is logged as one line
// "prepared <ns>/<claim> <uid>: <pool>/<device>=<id> ..." / "unprepared <ns>/<claim> <uid>"; kubelet's answer to
// the registration as "registered with kubelet" (or "kubelet refused the registration: ...").
//
// Usage: dra-driver --kubeconfig FILE --node NAME [--driver NAME] [--nics N]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

const (
	deviceIDAttr     = "k8s.cni.cncf.io/deviceID"
	resourceNameAttr = "k8s.cni.cncf.io/resourceName"
	dpDevinfoDir     = "/run/k8s.cni.cncf.io/devinfo/dp"
)

type driver struct {
	name      string
	pool      string
	stateDir  string
	resource  string
	deviceIDs map[string]string // device name -> deviceID (NICs only)
}

// prepared is what a claim's state file keeps: the device-info files written for it.
type prepared struct {
	Files []string `json:"files"`
}

func (d *driver) devices(nics int) []resourceapi.Device {
	var out []resourceapi.Device
	for i := 0; i < nics; i++ {
		name := fmt.Sprintf("nic%d", i)
		id := fmt.Sprintf("0000:00:1%d.0", i)
		d.deviceIDs[name] = id
		out = append(out, resourceapi.Device{
			Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				deviceIDAttr:     {StringValue: &id},
				resourceNameAttr: {StringValue: &d.resource},
				"type":           {StringValue: ptr("nic")},
			},
		})
	}
	out = append(out, resourceapi.Device{
		Name:       "gpu0",
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr("gpu")}},
	})
	return out
}

func ptr[T any](v T) *T { return &v }

func (d *driver) statePath(uid types.UID) string {
	return filepath.Join(d.stateDir, string(uid)+".json")
}

// devinfoPath is the file a device plugin writes for one device (net-attach-def-client's naming).
func devinfoPath(resource, id string) string {
	return filepath.Join(dpDevinfoDir, strings.ReplaceAll(resource, "/", "-")+"-"+strings.ReplaceAll(id, "/", "-")+"-device.json")
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		out[c.UID] = d.prepare(c)
	}
	return out, nil
}

func (d *driver) prepare(c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	var st prepared
	var devs []kubeletplugin.Device
	var said []string
	if c.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", c.Namespace, c.Name)}
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != d.name {
			continue
		}
		if r.Pool != d.pool {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: pool %q is not this node's", c.Namespace, c.Name, r.Pool)}
		}
		devs = append(devs, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device})
		id, nic := d.deviceIDs[r.Device]
		if !nic {
			said = append(said, r.Pool+"/"+r.Device)
			continue
		}
		info, _ := json.Marshal(map[string]any{"type": "pci", "version": "1.1.0", "pci": map[string]string{"pci-address": id}})
		f := devinfoPath(d.resource, id)
		if err := writeFileAtomic(f, info); err != nil {
			return kubeletplugin.PrepareResult{Err: err}
		}
		st.Files = append(st.Files, f)
		said = append(said, r.Pool+"/"+r.Device+"="+id)
	}
	data, _ := json.Marshal(st)
	if err := writeFileAtomic(d.statePath(c.UID), data); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	log.Printf("prepared %s/%s %s: %s", c.Namespace, c.Name, c.UID, strings.Join(said, " "))
	return kubeletplugin.PrepareResult{Devices: devs}
}

func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = d.unprepare(c)
	}
	return out, nil
}

func (d *driver) unprepare(c kubeletplugin.NamespacedObject) error {
	data, err := os.ReadFile(d.statePath(c.UID))
	if errors.Is(err, os.ErrNotExist) {
		log.Printf("unprepared %s/%s %s (was not prepared)", c.Namespace, c.Name, c.UID)
		return nil
	}
	if err != nil {
		return err
	}
	var st prepared
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("claim %s: state file: %w", c.UID, err)
	}
	for _, f := range st.Files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(d.statePath(c.UID)); err != nil {
		return err
	}
	log.Printf("unprepared %s/%s %s", c.Namespace, c.Name, c.UID)
	return nil
}

func (d *driver) HandleError(_ context.Context, err error, msg string) {
	log.Printf("error: %s: %v", msg, err)
}

// WatchHealthStatus: the fake devices have no health to report (the helper's health service is off, so kubelet
// never asks; 1.37's DRAPlugin interface requires the method).
func (d *driver) WatchHealthStatus(_ context.Context, _ chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	node := flag.String("node", "", "the node's name (its ResourceSlice's pool)")
	name := flag.String("driver", "nic.multus-ts.test", "the driver's name")
	resource := flag.String("resource-name", "multus-ts.test/nic", "the NICs' k8s.cni.cncf.io/resourceName")
	nics := flag.Int("nics", 3, "how many NICs to publish (deviceIDs 0000:00:10.0, 0000:00:11.0, ...)")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *kubeconfig == "" || *node == "" || *nics < 0 || *nics > 9 {
		log.Fatal("usage: dra-driver --kubeconfig FILE --node NAME [--driver NAME] [--resource-name R] [--nics 0-9]")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	pluginDir := filepath.Join(kubeletplugin.KubeletPluginsDir, *name)
	d := &driver{name: *name, pool: *node, stateDir: filepath.Join(pluginDir, "claims"), resource: *resource, deviceIDs: map[string]string{}}
	if err := os.MkdirAll(d.stateDir, 0o700); err != nil {
		log.Fatal(err)
	}
	nodeObj, err := client.CoreV1().Nodes().Get(ctx, *node, metav1.GetOptions{})
	if err != nil {
		log.Fatalf("node %s: %v", *node, err)
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(client),
		kubeletplugin.DriverName(*name),
		kubeletplugin.NodeName(*node),
		kubeletplugin.NodeUID(nodeObj.UID),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		log.Fatalf("start: %v", err)
	}
	defer helper.Stop()
	devices := d.devices(*nics)
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{*node: {Slices: []resourceslice.Slice{{Devices: devices}}}},
	}); err != nil {
		log.Fatalf("publish: %v", err)
	}
	log.Printf("serving %s on node %s: %d devices in pool %s", *name, *node, len(devices), *node)
	// kubelet answers the registration (NotifyRegistrationStatus): logged once, accepted or not
	go func() {
		for ctx.Err() == nil {
			if st := helper.RegistrationStatus(); st != nil {
				if st.PluginRegistered {
					log.Printf("registered with kubelet")
				} else {
					log.Printf("kubelet refused the registration: %s", st.Error)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	<-ctx.Done()
	log.Printf("stopping")
}
