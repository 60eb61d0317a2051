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
	"net/netip"
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
	// envRS lists the EniAddress of the fake EC2's Route Server endpoints
	// (comma-separated); "denied" makes DescribeRouteServerEndpoints
	// answer UnauthorizedOperation.
	envRS    = "OVNBGP_E2E_ROUTE_SERVER_ENDPOINTS"
	fakeIMDS = "169.254.169.254"
	fakeEC2  = "http://169.254.169.254:8080"
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
		err = serveFakeAWS(os.Getenv(envSDC) == "true", os.Getenv(envRS))
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	fmt.Fprintln(os.Stderr, "helper:", err)
	os.Exit(1)
}

// serveFakeAWS serves IMDSv2 on port 80 and the EC2 API on 8080. IMDS
// refuses reads without its token; EC2 refuses requests not signed (SigV4
// header shape) with the role's key and session token. It answers
// DescribeNetworkInterfaces (one ENI, its source/destination check
// sourceDestCheck) and DescribeRouteServerEndpoints (the comma-separated
// EniAddresses of routeServers, or UnauthorizedOperation for "denied").
func serveFakeAWS(sourceDestCheck bool, routeServers string) error {
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
		if form.Get("Action") == "DescribeRouteServerEndpoints" {
			if routeServers == "denied" {
				http.Error(w, "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors></Response>", http.StatusForbidden)
				return
			}
			var items strings.Builder
			for i, a := range strings.Split(routeServers, ",") {
				if a != "" {
					fmt.Fprintf(&items, "<item><routeServerEndpointId>rse-%d</routeServerEndpointId><eniAddress>%s</eniAddress><state>available</state></item>", i, a)
				}
			}
			fmt.Fprintf(w, `<DescribeRouteServerEndpointsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><routeServerEndpointSet>%s</routeServerEndpointSet></DescribeRouteServerEndpointsResponse>`, items.String())
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
	cmd.Env = doctorEnv(os.Environ(), env...)
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

// doctorEnv is base without the variables that change doctor's verdicts
// (AWS_*: the metadata service and EC2 endpoints, AWS_EC2_METADATA_DISABLED;
// CREDENTIALS_DIRECTORY), plus extra: the test alone decides them, not the
// CI environment.
func doctorEnv(base []string, extra ...string) []string {
	var out []string
	for _, kv := range base {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "CREDENTIALS_DIRECTORY=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// TestDoctorEnv: the doctor runs of these tests do not inherit AWS_* or
// CREDENTIALS_DIRECTORY from the environment (a CI runner on EC2 could set
// AWS_EC2_METADATA_DISABLED or an endpoint), only what the test passes.
func TestDoctorEnv(t *testing.T) {
	base := []string{"PATH=/usr/bin", "AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL_EC2=http://ec2.ci", "CREDENTIALS_DIRECTORY=/run/x", "HOME=/root"}
	got := doctorEnv(base, "AWS_METADATA_SERVICE_TIMEOUT=30")
	want := []string{"PATH=/usr/bin", "HOME=/root", "AWS_METADATA_SERVICE_TIMEOUT=30"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("doctorEnv = %q, want %q", got, want)
	}
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
	return doctorConfigPeers(t, dir, northbound, tor)
}

// doctorConfigPeers is doctorConfig with the given peers (the import rule
// names the first).
func doctorConfigPeers(t *testing.T, dir, northbound string, peers ...lab.Peer) string {
	t.Helper()
	text, err := lab.DaemonConfig{
		Node: "node1", ASN: 65010, RouterID: lab.NodeIPv4, ListenPort: 179, Peers: peers,
		Advertise: `  - {name: pods, kind: podNetwork, networks: ["*"]}`,
		Import: `  - name: up
    peers: [` + peers[0].Name + `]
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
	// One report that sees it all: its checks run one after another, and
	// the daemon may make its socket between two of them (CI saw daemon
	// skip, then control-socket pass, in one report).
	passes := func(rep doctor.Report, check, finding string) bool {
		for _, r := range find(rep, check) {
			if r.Status == doctor.Pass && strings.Contains(r.Finding, finding) {
				return true
			}
		}
		return false
	}
	lab.Eventually(t, generous, 200*time.Millisecond, "doctor sees the daemon on port 179 and its control socket", func() error {
		rep, _ = doctorIn(t, l, d.Config)
		if !passes(rep, "bgp-port", "held by ovnbgp itself: ovnbgp (pid ") || !passes(rep, "daemon", "answers on its control socket") {
			return fmt.Errorf("bgp-port: %+v; daemon: %+v", find(rep, "bgp-port"), find(rep, "daemon"))
		}
		return nil
	})
	want(t, rep, "daemon", doctor.Pass, "answers on its control socket: 1 peers")
	want(t, rep, "control-socket", doctor.Pass, "held by ovnbgp itself")
	if !strings.Contains(fmt.Sprint(find(rep, "bgp-port")), fmt.Sprintf("pid %d)", d.PID())) {
		t.Errorf("bgp-port names another pid than the daemon's %d: %+v", d.PID(), find(rep, "bgp-port"))
	}
}

// connectNode and connectTGW are the two ends of a Transit Gateway
// Connect peer's inside /29 (in 169.254.0.0/16), put on the lab's link.
var (
	connectNode = netip.MustParseAddr("169.254.6.1")
	connectTGW  = netip.MustParseAddr("169.254.6.2")
)

// addConnectInside puts the Connect inside /29 on the lab's link: the
// node's end in the node namespace, the Transit Gateway's on the tor side.
func addConnectInside(t *testing.T, l *lab.Lab) {
	t.Helper()
	for _, c := range [][]string{
		{"ip", "-n", l.Node, "addr", "add", connectNode.String() + "/29", "dev", lab.NodeLink},
		{"ip", "-n", l.Tor, "addr", "add", connectTGW.String() + "/29", "dev", lab.TorLink},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
}

// TestDoctorAWS: inside a namespace that has 169.254.169.254 on its
// loopback, a fake IMDSv2 and EC2 API served by the test: the instance is
// found, the ENI's source/destination check is read through a SigV4-signed
// DescribeNetworkInterfaces, and each peer's AWS route quota is checked
// against maxAdvertised: 100 for a peer that DescribeRouteServerEndpoints
// lists as a Route Server endpoint (assumed, and only a warning, when the
// role may not call it), 1,000 for a Transit Gateway Connect peer (its
// address inside 169.254.0.0/16), none for another peer. Outside
// (TestDoctor) the same binary skips the AWS checks.
func TestDoctorAWS(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	if out, err := l.Exec(l.Node, "ip", "addr", "add", fakeIMDS+"/32", "dev", "lo"); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	addConnectInside(t, l)
	sysctlIn(t, l, l.Node, "net.ipv4.ip_forward", "1", "net.ipv4.conf.all.rp_filter", "0", "net.ipv4.conf."+lab.NodeLink+".rp_filter", "0")
	// a busy machine may take more than doctor's 300 ms to answer: no timing here
	env := []string{"AWS_ENDPOINT_URL_EC2=" + fakeEC2, "AWS_METADATA_SERVICE_TIMEOUT=30"}
	tor := lab.TorIPv4.String()

	// the check is on, the peer (a Route Server endpoint) has no export cap
	stop := startHelper(t, l.Node, "fake-aws", envSDC+"=true", envRS+"=10.0.9.5,"+tor)
	rep, code := doctorIn(t, l, doctorConfig(t, l.MkdirUnique("doctor"), nb.Endpoint(), 0), env...)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want(t, rep, "aws-instance", doctor.Pass, "EC2 instance i-0e2e in eu-west-1 (IMDSv2)")
	want(t, rep, "aws-source-dest-check", doctor.Fail, "on for eni-e2e0 (device 0)")
	want(t, rep, "aws-route-server-quota", doctor.Warn, "tor (Route Server endpoint, quota 100) has no maxAdvertised")
	t.Logf("source/dest check on, no cap: exit %d\n%s", code, reportText(rep))
	stop()

	// off, and capped at the quota: everything passes
	stop = startHelper(t, l.Node, "fake-aws", envSDC+"=false", envRS+"="+tor)
	rep, code = doctorIn(t, l, doctorConfig(t, l.MkdirUnique("doctor"), nb.Endpoint(), 100), env...)
	if code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, reportText(rep))
	}
	want(t, rep, "aws-source-dest-check", doctor.Pass, "off on eni-e2e0")
	want(t, rep, "aws-route-server-quota", doctor.Pass, "tor (Route Server endpoint, quota 100): maxAdvertised 100")

	// a Transit Gateway Connect peer capped at 1,000 (docs/aws.md's
	// config): it passes, where the Route Server quota used to warn. The
	// only warning: the import rule of doctorConfigPeers lists the peer,
	// whose link-local address (169.254.6.2) is never an acceptable next
	// hop (docs/aws.md, "Importing routes on AWS").
	tgw := lab.Peer{Name: "tgw-1", Address: connectTGW, ASN: 64600, MaxAdvertised: 1000}
	rep, code = doctorIn(t, l, doctorConfigPeers(t, l.MkdirUnique("doctor"), nb.Endpoint(), tgw), env...)
	if code != 1 || rep.Summary[doctor.Warn] != 1 {
		t.Errorf("Connect peer at 1000: exit code %d, %d warnings, want 1 and 1 (peer-next-hop):\n%s", code, rep.Summary[doctor.Warn], reportText(rep))
	}
	want(t, rep, "peer-next-hop", doctor.Warn, "peer tgw-1 (169.254.6.2, import rule up): every route it sends with itself as next hop is refused: \"next hop 169.254.6.2 is a link-local address\"")
	want(t, rep, "aws-route-server-quota", doctor.Pass, "tgw-1 (Transit Gateway Connect peer, quota 1000): maxAdvertised 1000")
	tgw.MaxAdvertised = 1001
	rep, code = doctorIn(t, l, doctorConfigPeers(t, l.MkdirUnique("doctor"), nb.Endpoint(), tgw), env...)
	if code != 1 {
		t.Errorf("Connect peer capped above 1000: exit code %d, want 1:\n%s", code, reportText(rep))
	}
	want(t, rep, "aws-route-server-quota", doctor.Warn, "tgw-1 (Transit Gateway Connect peer, quota 1000) has maxAdvertised 1001")

	stop()

	// a peer EC2 does not list as an endpoint has no AWS quota
	stop = startHelper(t, l.Node, "fake-aws", envSDC+"=false", envRS+"=10.0.9.5")
	rep, _ = doctorIn(t, l, doctorConfigPeers(t, l.MkdirUnique("doctor"), nb.Endpoint(), lab.DefaultTor()), env...)
	want(t, rep, "aws-route-server-quota", doctor.Pass, "tor is neither a Route Server endpoint (EC2 lists 1) nor a Transit Gateway Connect peer")
	stop()

	// the role may not list the endpoints: assumed, and only a warning
	startHelper(t, l.Node, "fake-aws", envSDC+"=false", envRS+"=denied")
	rep, code = doctorIn(t, l, doctorConfig(t, l.MkdirUnique("doctor"), nb.Endpoint(), 0), env...)
	if code != 1 {
		t.Errorf("endpoints unknown: exit code %d, want 1:\n%s", code, reportText(rep))
	}
	want(t, rep, "aws-route-server-quota", doctor.Warn, "tor (assumed to be a Route Server endpoint, quota 100) has no maxAdvertised")
	want(t, rep, "aws-route-server-quota", doctor.Warn, "DescribeRouteServerEndpoints: HTTP 403 UnauthorizedOperation")
}

// TestDoctorConnectQuota: the daemon runs with a Transit Gateway Connect
// peer (FRR at 169.254.6.2, the node at 169.254.6.1) and 1,001 Service
// VIPs to advertise, no export cap: doctor (on a fake EC2) reads the
// count from the daemon and fails the Connect quota of 1,000; after a
// reload with maxAdvertised 1000 the daemon sends 1,000 and the check
// passes. A Route Server's quota of 100 would have failed both.
func TestDoctorConnectQuota(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	if out, err := l.Exec(l.Node, "ip", "addr", "add", fakeIMDS+"/32", "dev", "lo"); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	addConnectInside(t, l)
	vips := map[string]string{}
	for i := range 1001 {
		vips[fmt.Sprintf("198.18.%d.%d:80", i/250, 1+i%250)] = "10.128.0.5:8080"
	}
	createServiceLB(t, nb, "", "ns1/many", "tcp", vips)
	l.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: connectNode, ASN: 65010, Passive: true}}})
	cfg := lab.DaemonConfig{
		Peers:        []lab.Peer{{Name: "tgw-1", Address: connectTGW, ASN: 65001}},
		Advertise:    "  - {name: vips, kind: loadBalancerIP}",
		ServiceCIDRs: advServiceCIDRs,
	}
	d := l.StartDaemon(nb, cfg)
	advertising := func(n int) {
		t.Helper()
		lab.Eventually(t, generous, 200*time.Millisecond, fmt.Sprintf("the daemon advertises %d prefixes to tgw-1", n), func() error {
			p, err := d.Peer("tgw-1")
			if err != nil {
				return err
			}
			got := 0
			for _, f := range p.Families {
				got += f.Advertised
			}
			if got != n {
				return fmt.Errorf("tgw-1 (%s) advertised %d", p.State, got)
			}
			return nil
		})
	}
	advertising(1001)
	startHelper(t, l.Node, "fake-aws", envSDC+"=false", envRS+"=")
	env := []string{"AWS_ENDPOINT_URL_EC2=" + fakeEC2, "AWS_METADATA_SERVICE_TIMEOUT=30"}
	rep, code := doctorIn(t, l, d.Config, env...)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want(t, rep, "daemon", doctor.Pass, "answers on its control socket")
	want(t, rep, "aws-route-server-quota", doctor.Fail, "tgw-1 (Transit Gateway Connect peer) advertises 1001, above its quota of 1000")
	t.Logf("1001 routes to a Connect peer: exit %d\n%s", code, reportText(rep))

	next := d.Cfg
	next.Peers = []lab.Peer{{Name: "tgw-1", Address: connectTGW, ASN: 65001, MaxAdvertised: 1000}}
	if err := d.Reload(next); err != nil {
		t.Fatal(err)
	}
	advertising(1000)
	rep, _ = doctorIn(t, l, d.Config, env...)
	want(t, rep, "aws-route-server-quota", doctor.Pass, "tgw-1 (Transit Gateway Connect peer, quota 1000): maxAdvertised 1000, advertising 1000 now")
}
