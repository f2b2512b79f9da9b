// probe: CPU (user+sys, from wait4's rusage: the process and the children it waited for) of ADD+DEL pairs through
// the shim against a daemon with delegateExec "caller" and one with "daemon", and of the noop delegate run alone;
// the daemons' own CPU from /proc/<pid>/stat. Rounds alternate the modes.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func cpu(ps *os.ProcessState) time.Duration {
	ru := ps.SysUsage().(*syscall.Rusage)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(path string, env []string, stdin []byte) time.Duration {
	c := exec.Command(path)
	c.Env = env
	c.Stdin = bytes.NewReader(stdin)
	var out bytes.Buffer
	c.Stdout = &out
	if err := c.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v: %s\n", path, err, out.String())
		os.Exit(1)
	}
	return cpu(c.ProcessState)
}

func procCPU(pid string) (own, children float64) {
	b, _ := os.ReadFile("/proc/" + pid + "/stat")
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v / 100 }
	return n(11) + n(12), n(13) + n(14)
}

func main() {
	// args: shim noop netns rounds callerConf daemonConf callerPid daemonPid
	a := os.Args[1:]
	shim, noop, netns := a[0], a[1], a[2]
	rounds, _ := strconv.Atoi(a[3])
	confs := map[string][]byte{}
	confs["caller"], _ = os.ReadFile(a[4])
	confs["daemon"], _ = os.ReadFile(a[5])
	pids := map[string]string{"caller": a[6], "daemon": a[7]}
	total := map[string]time.Duration{}
	dOwn0, dKids0 := map[string]float64{}, map[string]float64{}
	for m, p := range pids {
		dOwn0[m], dKids0[m] = procCPU(p)
	}
	base := []string{"PATH=/usr/bin:/bin", "CNI_NETNS=" + netns, "CNI_IFNAME=eth0", "CNI_PATH=/tmp/shimprobe/bin",
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p"}
	for r := 0; r < rounds; r++ {
		for _, m := range []string{"caller", "daemon"} {
			for _, cmd := range []string{"ADD", "DEL"} {
				env := append(base, "CNI_COMMAND="+cmd, fmt.Sprintf("CNI_CONTAINERID=%s%d", m, r))
				total[m] += run(shim, env, confs[m])
			}
		}
		for _, cmd := range []string{"ADD", "DEL", "ADD", "DEL"} { // the two delegates of a pair, run alone
			total["noop"] += run(noop, append(base, "CNI_COMMAND="+cmd, "CNI_CONTAINERID=x"), []byte(`{"cniVersion":"1.0.0","name":"n","type":"noop"}`))
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(rounds) }
	fmt.Printf("rounds %d (an ADD+DEL pair each, 2 delegates per call)\n", rounds)
	fmt.Printf("shim tree CPU per pair, ms: caller %.2f, daemon %.2f; the 4 delegate runs alone %.2f\n",
		per(total["caller"]), per(total["daemon"]), per(total["noop"]))
	fmt.Printf("the shim's own added CPU per pair (caller - daemon - delegates): %.2f ms\n",
		per(total["caller"])-per(total["daemon"])-per(total["noop"]))
	for _, m := range []string{"caller", "daemon"} {
		o, k := procCPU(pids[m])
		fmt.Printf("daemon (%s) per pair, ms: own %.2f, its children %.2f\n", m, (o-dOwn0[m])*1000/float64(rounds), (k-dKids0[m])*1000/float64(rounds))
	}
}
