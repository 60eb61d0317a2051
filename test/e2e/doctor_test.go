package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/doctor"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The helper processes of the doctor tests: the test binary runs again,
// inside a lab namespace, as a foreign listener on a TCP port or as a fake
// EC2 metadata service and EC2 API on 169.254.169.254 (an address on the
// namespace's loopback: nothing leaves the namespace).
const (
	envHelper = "OVNBGP_E2E_HELPER" // "listen:PORT" or "fake-aws"
	envSDC    = "OVNBGP_E2E_SOURCE_DEST_CHECK"
	fakeIMDS  = "169.254.169.254"
	fakeEC2   = "http://169.254.169.254:8080"
)

// runHelper runs a helper when the test binary was started as one.
func runHelper() {
	mode := os.Getenv(envHelper)
	if mode == "" {
		return
	}
	var err error
	switch {
	case strings.HasPrefix(mode, "listen:"):
		var ln net.Listener
		if ln, err = net.Listen("tcp", ":"+strings.TrimPrefix(mode, "listen:")); err == nil {
			fmt.Println("ready")
			for {
				c, err := ln.Accept()
				if err != nil {
					break
				}
				c.Close()
			}
		}
	case mode == "fake-aws":
		err = serveFakeAWS(os.Getenv(envSDC) == "true")
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	fmt.Fprintln(os.Stderr, "helper:", err)
	os.Exit(1)
}

// serveFakeAWS serves IMDSv2 on port 80 and the EC2 API on 8080. IMDS
// refuses reads without its token; EC2 refuses requests not signed (SigV4
// header shape) with the role's key and session token.
func serveFakeAWS(sourceDestCheck bool) error {
	imds := http.NewServeMux()
	imds.HandleFunc("PUT /latest/api/token", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			http.Error(w, "", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "e2e-token")
	})
	meta := map[string]string{
		"instance-id":                            "i-0e2e",
		"placement/region":                       "eu-west-1",
		"iam/security-credentials/":              "e2e-node-role",
		"iam/security-credentials/e2e-node-role": `{"Code":"Success","AccessKeyId":"ASIAE2E","SecretAccessKey":"s","Token":"e2e-session"}`,
	}
	imds.HandleFunc("GET /latest/meta-data/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-aws-ec2-metadata-token") != "e2e-token" {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		v, ok := meta[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, v)
	})
	ec2 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=ASIAE2E/") ||
			!strings.Contains(r.Header.Get("Authorization"), "/eu-west-1/ec2/aws4_request, SignedHeaders=") ||
			r.Header.Get("X-Amz-Security-Token") != "e2e-session" {
			http.Error(w, "<Response><Errors><Error><Code>AuthFailure</Code><Message>not signed</Message></Error></Errors></Response>", http.StatusUnauthorized)
			return
		}
		if form.Get("Action") != "DescribeNetworkInterfaces" || form.Get("Filter.1.Value.1") != "i-0e2e" {
			http.Error(w, "<Response><Errors><Error><Code>InvalidParameter</Code><Message>bad request</Message></Error></Errors></Response>", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `<DescribeNetworkInterfacesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><networkInterfaceSet>`+
			`<item><networkInterfaceId>eni-e2e0</networkInterfaceId><attachment><deviceIndex>0</deviceIndex></attachment><sourceDestCheck>%v</sourceDestCheck></item>`+
			`</networkInterfaceSet></DescribeNetworkInterfacesResponse>`, sourceDestCheck)
	})
	l80, err := net.Listen("tcp", fakeIMDS+":80")
	if err != nil {
		return err
	}
	l8080, err := net.Listen("tcp", fakeIMDS+":8080")
	if err != nil {
		return err
	}
	fmt.Println("ready")
	errs := make(chan error, 2)
	go func() { errs <- http.Serve(l80, imds) }()
	go func() { errs <- http.Serve(l8080, ec2) }()
	return <-errs
}

// startHelper starts the test binary as helper mode inside ns and waits
// for it to say ready; it is killed (by PID) at the end of the test or by
// the returned stop.
func startHelper(t *testing.T, ns, mode string, env ...string) (stop func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, exe)
	cmd.Env = append(append(os.Environ(), envHelper+"="+mode), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stop = func() {
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Kill() // `ip netns exec` execs: this PID is the helper's
		_ = cmd.Wait()
		close(done)
	}
	t.Cleanup(stop)
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			stop()
			t.Fatalf("helper %s in %s: %v: %s", mode, ns, err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("helper %s in %s not ready after 30s: %s", mode, ns, stderr.String())
	}
	return stop
}

// doctorIn runs `ovnbgp doctor -o json --config cfg` in the lab's node
// namespace and returns its report and exit code.
func doctorIn(t *testing.T, l *lab.Lab, cfg string, env ...string) (doctor.Report, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.Node, lab.Binary(t), "doctor", "-o", "json", "--timeout", "30s", "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("ovnbgp doctor: %v: %s", err, stderr.String())
	}
	var rep doctor.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("ovnbgp doctor -o json: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if code != rep.ExitCode {
		t.Errorf("exit code %d, but the report says %d", code, rep.ExitCode)
	}
	return rep, code
}

// find returns the results of check id.
func find(rep doctor.Report, id string) []doctor.Result {
	var out []doctor.Result
	for _, r := range rep.Checks {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

// want fails unless check id has a result with status whose finding
// contains sub.
func want(t *testing.T, rep doctor.Report, id string, status doctor.Status, sub string) {
	t.Helper()
	for _, r := range find(rep, id) {
		if r.Status == status && strings.Contains(r.Finding, sub) {
			return
		}
	}
	t.Errorf("no %s result of check %s containing %q; report:\n%s", status, id, sub, reportText(rep))
}

func reportText(rep doctor.Report) string {
	var b strings.Builder
	for _, r := range rep.Checks {
		fmt.Fprintf(&b, "  %-22s %-4s %s | %s\n", r.ID, r.Status, r.Finding, r.Fix)
	}
	return b.String()
}

// sysctlIn writes /proc/sys values inside ns.
func sysctlIn(t *testing.T, l *lab.Lab, ns string, kv ...string) {
	t.Helper()
	var sh []string
	for i := 0; i+1 < len(kv); i += 2 {
		sh = append(sh, "echo "+kv[i+1]+" >/proc/sys/"+strings.ReplaceAll(kv[i], ".", "/"))
	}
	if out, err := l.Exec(ns, "sh", "-c", strings.Join(sh, " && ")); err != nil {
		t.Fatalf("sysctl in %s: %v: %s", ns, err, out)
	}
}

// doctorConfig writes a config for node1 with an import rule into OVN and
// table 100, peer tor, listening on 179, its socket in dir.
func doctorConfig(t *testing.T, dir, northbound string, maxAdvertised int) string {
	t.Helper()
	tor := lab.DefaultTor()
	tor.MaxAdvertised = maxAdvertised
	text, err := lab.DaemonConfig{
		Node: "node1", ASN: 65010, RouterID: lab.NodeIPv4, ListenPort: 179, Peers: []lab.Peer{tor},
		Advertise: `  - {name: pods, kind: podNetwork, networks: ["*"]}`,
		Import: `  - name: up
    peers: [tor]
    network: default
    accept: [{prefix: 198.51.100.0/24, maxLength: 32}]
    targets: {ovn: true, kernel: {table: 100}}`,
		Northbound: northbound, Socket: filepath.Join(dir, "ovnbgp.sock"), StateDir: filepath.Join(dir, "state"),
	}.Render()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDoctor runs `ovnbgp doctor -o json` in a lab node namespace against a
// real ovsdb-server: the node's gateway router absent then present, port
// 179 held by a foreign process then free then held by the daemon, the
// forwarding and rp_filter sysctls of the namespace, a foreign routing
// daemon's routes in the import table, and OVN-Kubernetes' route import on
// the gateway router; exit codes 2, 0, 1, 2.
func TestDoctor(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	cfg := doctorConfig(t, l.MkdirUnique("doctor"), nb.Endpoint(), 0)

	// 1. no GR_node1, bgp port taken, no forwarding
	nb.MustNBCtl("--if-exists", "lr-del", "GR_node1")
	stop := startHelper(t, l.Node, "listen:179")
	sysctlIn(t, l, l.Node, "net.ipv4.ip_forward", "0", "net.ipv4.conf.all.rp_filter", "0", "net.ipv4.conf."+lab.NodeLink+".rp_filter", "0")
	rep, code := doctorIn(t, l, cfg)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want(t, rep, "config", doctor.Pass, "is valid")
	want(t, rep, "nb", doctor.Pass, "answers at "+nb.Endpoint())
	want(t, rep, "gateway-routers", doctor.Fail, `no gateway router GR_node1 for node.name "node1"`)
	want(t, rep, "bgp-port", doctor.Fail, "port 179 is held by e2e.test (pid ")
	want(t, rep, "ipv4-forwarding", doctor.Fail, "net.ipv4.ip_forward is 0")
	want(t, rep, "daemon", doctor.Skip, "does not answer")
	want(t, rep, "aws-instance", doctor.Skip, "not on AWS")
	t.Logf("no gateway router, port taken, no forwarding: exit %d\n%s", code, reportText(rep))

	// 2. all good
	stop()
	nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	sysctlIn(t, l, l.Node, "net.ipv4.ip_forward", "1")
	rep, code = doctorIn(t, l, cfg)
	if code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, reportText(rep))
	}
	want(t, rep, "gateway-routers", doctor.Pass, "GR_node1 of network default present")
	want(t, rep, "bgp-port", doctor.Pass, "port 179 is free")
	want(t, rep, "rp-filter", doctor.Pass, "uplink "+lab.NodeLink+" (peers tor): rp_filter 0")
	want(t, rep, "kernel-tables", doctor.Pass, "table 100 is ovnbgp's alone")
	want(t, rep, "ovnk-route-import", doctor.Pass, "no OVN-Kubernetes route import rows")
	for _, r := range rep.Checks {
		if r.Status != doctor.Pass && r.Status != doctor.Skip {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Finding)
		}
	}

	// 3. strict rp_filter on the uplink, with import: a warning
	sysctlIn(t, l, l.Node, "net.ipv4.conf."+lab.NodeLink+".rp_filter", "1")
	rep, code = doctorIn(t, l, cfg)
	if code != 1 {
		t.Errorf("exit code %d, want 1:\n%s", code, reportText(rep))
	}
	want(t, rep, "rp-filter", doctor.Warn, "uplink "+lab.NodeLink+" (peers tor): rp_filter 1 (all 0, "+lab.NodeLink+" 1) is strict")

	// 4. FRR's routes in the import table, and OVN-Kubernetes' route import
	// on GR_node1: two writers, twice
	if out, err := l.Exec(l.Node, "ip", "route", "add", "198.51.100.0/25", "dev", lab.NodeLink, "table", "100", "proto", "186"); err != nil {
		t.Fatalf("ip route add: %v: %s", err, out)
	}
	nb.MustNBCtl("--id=@r", "create", "logical_router_static_route", "ip_prefix=203.0.113.0/24", "nexthop=192.0.2.1",
		`external_ids:"k8s.ovn.org/owner-controller"=RouteImport`, "--", "add", "logical_router", "GR_node1", "static_routes", "@r")
	rep, code = doctorIn(t, l, cfg)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want(t, rep, "kernel-tables", doctor.Fail, "table 100 holds 1 routes of FRR's bgpd (bgp) (protocol 186)")
	want(t, rep, "ovnk-route-import", doctor.Fail, "two writers on GR_node1")
	t.Logf("FRR routes in table 100, RouteImport on GR_node1, strict rp_filter: exit %d\n%s", code, reportText(rep))
}

// TestDoctorDaemonRunning: with the daemon running, port 179 and the
// control socket are held by ovnbgp itself, and doctor reads its peers.
func TestDoctorDaemonRunning(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	d := l.StartDaemon(nb, lab.DaemonConfig{ListenPort: 179})
	var rep doctor.Report
	lab.Eventually(t, generous, 200*time.Millisecond, "doctor sees the daemon on port 179", func() error {
		rep, _ = doctorIn(t, l, d.Config)
		for _, r := range find(rep, "bgp-port") {
			if r.Status == doctor.Pass && strings.Contains(r.Finding, "held by ovnbgp itself: ovnbgp (pid ") {
				return nil
			}
		}
		return fmt.Errorf("bgp-port: %+v", find(rep, "bgp-port"))
	})
	want(t, rep, "daemon", doctor.Pass, "answers on its control socket: 1 peers")
	want(t, rep, "control-socket", doctor.Pass, "held by ovnbgp itself")
	if !strings.Contains(fmt.Sprint(find(rep, "bgp-port")), fmt.Sprintf("pid %d)", d.PID())) {
		t.Errorf("bgp-port names another pid than the daemon's %d: %+v", d.PID(), find(rep, "bgp-port"))
	}
}

// TestDoctorAWS: inside a namespace that has 169.254.169.254 on its
// loopback, a fake IMDSv2 and EC2 API served by the test: the instance is
// found, the ENI's source/destination check is read through a SigV4-signed
// DescribeNetworkInterfaces, and the Route Server quota is checked against
// maxAdvertised. Outside (TestDoctor) the same binary skips the AWS checks.
func TestDoctorAWS(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	if out, err := l.Exec(l.Node, "ip", "addr", "add", fakeIMDS+"/32", "dev", "lo"); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	sysctlIn(t, l, l.Node, "net.ipv4.ip_forward", "1", "net.ipv4.conf.all.rp_filter", "0", "net.ipv4.conf."+lab.NodeLink+".rp_filter", "0")
	// a busy machine may take more than doctor's 300 ms to answer: no timing here
	env := []string{"AWS_ENDPOINT_URL_EC2=" + fakeEC2, "AWS_METADATA_SERVICE_TIMEOUT=30"}

	// the check is on, the peer has no export cap
	stop := startHelper(t, l.Node, "fake-aws", envSDC+"=true")
	rep, code := doctorIn(t, l, doctorConfig(t, l.MkdirUnique("doctor"), nb.Endpoint(), 0), env...)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want(t, rep, "aws-instance", doctor.Pass, "EC2 instance i-0e2e in eu-west-1 (IMDSv2)")
	want(t, rep, "aws-source-dest-check", doctor.Fail, "on for eni-e2e0 (device 0)")
	want(t, rep, "aws-route-server-quota", doctor.Warn, "tor has no maxAdvertised")
	t.Logf("source/dest check on, no cap: exit %d\n%s", code, reportText(rep))
	stop()

	// off, and capped at the quota: everything passes
	startHelper(t, l.Node, "fake-aws", envSDC+"=false")
	rep, code = doctorIn(t, l, doctorConfig(t, l.MkdirUnique("doctor"), nb.Endpoint(), 100), env...)
	if code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, reportText(rep))
	}
	want(t, rep, "aws-source-dest-check", doctor.Pass, "off on eni-e2e0")
	want(t, rep, "aws-route-server-quota", doctor.Pass, "tor (maxAdvertised 100)")
}
