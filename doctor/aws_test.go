package doctor

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// fakeAWS is IMDSv2 and the EC2 API in memory: it refuses IMDS reads
// without the token it handed out, and EC2 calls that are not signed with
// the role's credentials for the instance's region.
type fakeAWS struct {
	role     string // "" = no instance role
	enis     []eni
	ec2Error string // an EC2 error code to answer with (HTTP 403)
	// rsEndpoints are the EniAddress of the region's Route Server
	// endpoints, answered one per page (NextToken) by
	// DescribeRouteServerEndpoints; rsError an error code it answers with
	// instead (HTTP 403).
	rsEndpoints []string
	rsError     string
	// region is the instance's region (default fakeRegion); domain what
	// IMDS answers at services/domain ("" = 404).
	region string
	domain string
}

func (f fakeAWS) regionName() string {
	if f.region == "" {
		return fakeRegion
	}
	return f.region
}

const (
	fakeToken    = "tok-123"
	fakeInstance = "i-0abc"
	fakeRegion   = "eu-west-1"
	fakeKey      = "ASIAFAKE"
)

func (f fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Host == "169.254.169.254" {
		f.imds(w, r)
		return
	}
	f.ec2(w, r)
}

func (f fakeAWS) imds(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/latest/api/token" {
		if r.Method != http.MethodPut || r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			http.Error(w, "bad token request", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, fakeToken)
		return
	}
	if r.Header.Get("X-aws-ec2-metadata-token") != fakeToken {
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	switch p := strings.TrimPrefix(r.URL.Path, "/latest/meta-data/"); {
	case p == "instance-id":
		fmt.Fprint(w, fakeInstance)
	case p == "placement/region":
		fmt.Fprint(w, f.regionName())
	case p == "services/domain" && f.domain != "":
		fmt.Fprint(w, f.domain)
	case p == "iam/security-credentials/" && f.role != "":
		fmt.Fprint(w, f.role+"\n")
	case p == "iam/security-credentials/"+f.role && f.role != "":
		fmt.Fprintf(w, `{"Code":"Success","AccessKeyId":"%s","SecretAccessKey":"secret","Token":"session","Expiration":"2030-01-01T00:00:00Z"}`, fakeKey)
	default:
		http.NotFound(w, r)
	}
}

func (f fakeAWS) ec2(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	auth := r.Header.Get("Authorization")
	day := time.Now().UTC().Format("20060102")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+fakeKey+"/") || !strings.Contains(auth, "/"+f.regionName()+"/ec2/aws4_request") ||
		r.Header.Get("X-Amz-Security-Token") != "session" || !strings.HasPrefix(r.Header.Get("X-Amz-Date"), day[:6]) {
		http.Error(w, "<Response><Errors><Error><Code>AuthFailure</Code><Message>unsigned</Message></Error></Errors></Response>", http.StatusUnauthorized)
		return
	}
	if form.Get("Action") == "DescribeRouteServerEndpoints" {
		f.routeServerEndpoints(w, form)
		return
	}
	if form.Get("Action") != "DescribeNetworkInterfaces" || form.Get("Filter.1.Name") != "attachment.instance-id" || form.Get("Filter.1.Value.1") != fakeInstance {
		http.Error(w, "<Response><Errors><Error><Code>InvalidParameter</Code><Message>"+string(body)+"</Message></Error></Errors></Response>", http.StatusBadRequest)
		return
	}
	if f.ec2Error != "" {
		http.Error(w, "<Response><Errors><Error><Code>"+f.ec2Error+"</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors></Response>", http.StatusForbidden)
		return
	}
	var items strings.Builder
	for _, e := range f.enis {
		fmt.Fprintf(&items, "<item><networkInterfaceId>%s</networkInterfaceId><attachment><deviceIndex>%s</deviceIndex></attachment><sourceDestCheck>%v</sourceDestCheck></item>",
			e.ID, e.Attachment.DeviceIndex, e.SourceDestCheck)
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<DescribeNetworkInterfacesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><networkInterfaceSet>%s</networkInterfaceSet></DescribeNetworkInterfacesResponse>`, items.String())
}

// routeServerEndpoints answers DescribeRouteServerEndpoints one endpoint
// per page: NextToken is the index of the next.
func (f fakeAWS) routeServerEndpoints(w http.ResponseWriter, form url.Values) {
	if f.rsError != "" {
		http.Error(w, "<Response><Errors><Error><Code>"+f.rsError+"</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors></Response>", http.StatusForbidden)
		return
	}
	i := 0
	if tok := form.Get("NextToken"); tok != "" {
		var err error
		if i, err = strconv.Atoi(strings.TrimPrefix(tok, "page-")); err != nil || i >= len(f.rsEndpoints) {
			http.Error(w, "<Response><Errors><Error><Code>InvalidNextToken</Code><Message>"+tok+"</Message></Error></Errors></Response>", http.StatusBadRequest)
			return
		}
	}
	var item, next string
	if i < len(f.rsEndpoints) {
		item = fmt.Sprintf("<item><routeServerId>rs-1</routeServerId><routeServerEndpointId>rse-%d</routeServerEndpointId><eniId>eni-rs%d</eniId><eniAddress>%s</eniAddress><state>available</state></item>", i, i, f.rsEndpoints[i])
	}
	if i+1 < len(f.rsEndpoints) {
		next = fmt.Sprintf("<nextToken>page-%d</nextToken>", i+1)
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<DescribeRouteServerEndpointsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><routeServerEndpointSet>%s</routeServerEndpointSet>%s</DescribeRouteServerEndpointsResponse>`, item, next)
}

func anENI(id, dev string, check bool) eni {
	e := eni{ID: id, SourceDestCheck: check}
	e.Attachment.DeviceIndex = dev
	return e
}

func TestCheckAWS(t *testing.T) {
	capped := strings.Replace(baseConfig, "asn: 65001}", "asn: 65001, maxAdvertised: 100}", 1)
	ec2 := map[string]string{envEC2: "http://ec2.test"}
	offOK := []eni{anENI("eni-1", "0", false), anENI("eni-2", "1", false)}
	rs := []string{"10.0.9.9", "192.0.2.1"} // tor-a is a Route Server endpoint (second page)
	advertising := func(peer string, n ...int) *DaemonView {
		st := model.PeerStatus{Name: peer}
		for i, c := range n {
			st.Families = append(st.Families, model.FamilyCounts{Family: []string{"ipv4", "ipv6"}[i], Advertised: c})
		}
		return &DaemonView{Peers: []model.PeerStatus{st}}
	}
	// a Transit Gateway Connect peer: its BGP address is inside 169.254.0.0/16
	tgw := func(maxAdv string) string {
		return strings.Replace(baseConfig, "    - {name: tor-a, address: 192.0.2.1, asn: 65001}\n",
			"    - {name: tgw-1, address: 169.254.6.2, asn: 64600"+maxAdv+"}\n", 1)
	}
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want []string
	}{
		{"not on AWS", &fakeEnv{}, baseConfig, []string{"skip:not on AWS: no IMDSv2 answer from http://169.254.169.254 within 300ms", "skip:", "skip:"}},
		{"IMDS timeout by env", &fakeEnv{env: map[string]string{envIMDSTimeout: "2.5"}}, baseConfig, []string{"skip:within 2.5s", "skip:", "skip:"}},
		{"bad IMDS timeout", &fakeEnv{aws: fakeAWS{}, env: map[string]string{envIMDSTimeout: "soon"}}, baseConfig, []string{"warn:AWS_METADATA_SERVICE_TIMEOUT=\"soon\" is not a number", "skip:", "skip:"}},
		{"IMDS off by env", &fakeEnv{aws: fakeAWS{}, env: map[string]string{envIMDSOff: "true"}}, baseConfig, []string{"skip:", "skip:", "skip:"}},
		{"all good", &fakeEnv{aws: fakeAWS{role: "node-role", enis: offOK, rsEndpoints: rs}, env: ec2}, capped,
			[]string{"pass:EC2 instance i-0abc in eu-west-1", "pass:off on eni-1 (device 0), eni-2 (device 1)", "pass:tor-a (Route Server endpoint, quota 100): maxAdvertised 100"}},
		{"check on", &fakeEnv{aws: fakeAWS{role: "node-role", enis: []eni{anENI("eni-1", "0", false), anENI("eni-2", "1", true)}, rsEndpoints: rs}, env: ec2}, capped,
			[]string{"pass:", "fail:on for eni-2 (device 1)", "pass:"}},
		{"no role", &fakeEnv{aws: fakeAWS{enis: offOK}, env: ec2}, capped, []string{"pass:", "warn:no IAM role", "pass:tor-a (assumed to be a Route Server endpoint, quota 100)"}},
		{"role not allowed", &fakeEnv{aws: fakeAWS{role: "r", ec2Error: "UnauthorizedOperation", rsError: "UnauthorizedOperation"}, env: ec2}, capped,
			[]string{"pass:", "warn:HTTP 403 UnauthorizedOperation", "pass:assumed to be a Route Server endpoint"}},
		{"no cap", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2}, baseConfig,
			[]string{"pass:", "pass:", "warn:tor-a (Route Server endpoint, quota 100) has no maxAdvertised"}},
		{"cap above quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2}, strings.Replace(capped, "maxAdvertised: 100", "maxAdvertised: 150", 1),
			[]string{"pass:", "pass:", "warn:tor-a (Route Server endpoint, quota 100) has maxAdvertised 150"}},
		{"daemon advertises above quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2, daemon: advertising("tor-a", 90, 30)}, baseConfig,
			[]string{"pass:", "pass:", "fail:tor-a (Route Server endpoint) advertises 120, above its quota of 100"}},
		{"daemon within quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2, daemon: advertising("tor-a", 7)}, capped,
			[]string{"pass:", "pass:", "pass:advertising 7 now"}},
		// M3: Transit Gateway Connect peers take 1,000 routes
		{"TGW peer capped at 1000", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2}, tgw(", maxAdvertised: 1000"),
			[]string{"pass:", "pass:", "pass:tgw-1 (Transit Gateway Connect peer, quota 1000): maxAdvertised 1000"}},
		{"TGW peer advertising 1000", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2, daemon: advertising("tgw-1", 900, 100)}, tgw(", maxAdvertised: 1000"),
			[]string{"pass:", "pass:", "pass:advertising 1000 now"}},
		{"TGW peer above 1000", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2, daemon: advertising("tgw-1", 1001)}, tgw(""),
			[]string{"pass:", "pass:", "fail:tgw-1 (Transit Gateway Connect peer) advertises 1001, above its quota of 1000"}},
		{"TGW peer without cap", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: rs}, env: ec2}, tgw(""),
			[]string{"pass:", "pass:", "warn:tgw-1 (Transit Gateway Connect peer, quota 1000) has no maxAdvertised"}},
		{"TGW peer cap above 1000", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK}, env: ec2}, tgw(", maxAdvertised: 1500"),
			[]string{"pass:", "pass:", "warn:has maxAdvertised 1500"}},
		// a peer EC2 lists as no Route Server endpoint has no AWS quota
		{"not a Route Server endpoint", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsEndpoints: []string{"10.0.9.9"}}, env: ec2, daemon: advertising("tor-a", 5000)}, baseConfig,
			[]string{"pass:", "pass:", "pass:tor-a is neither a Route Server endpoint (EC2 lists 1) nor a Transit Gateway Connect peer: no AWS quota"}},
		// endpoints unconfirmed: assumed, and only a warning even above 100
		{"assumed endpoint above quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK, rsError: "UnauthorizedOperation"}, env: ec2, daemon: advertising("tor-a", 120)}, baseConfig,
			[]string{"pass:", "pass:", "warn:tor-a (assumed to be a Route Server endpoint) advertises 120, above the quota of 100"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkAWS, tc.env, tc.doc), tc.want...) })
	}
}

// TestQuotaAssumedSaysWhy: when the endpoints cannot be listed the
// finding says why and the fix names the permission.
func TestQuotaAssumedSaysWhy(t *testing.T) {
	env := &fakeEnv{aws: fakeAWS{role: "node-role", enis: []eni{anENI("eni-1", "0", false)}, rsError: "UnauthorizedOperation"}, env: map[string]string{envEC2: "http://ec2.test"}}
	rs := run(t, checkAWS, env, baseConfig)
	q := rs[2]
	if q.Status != Warn || !strings.Contains(q.Finding, "DescribeRouteServerEndpoints: HTTP 403 UnauthorizedOperation") ||
		!strings.Contains(q.Fix, "ec2:DescribeRouteServerEndpoints") {
		t.Errorf("quota:\n%s", dump(rs))
	}
}

// TestAWSEndpoints: the metadata service is 169.254.169.254 unless the
// SDKs' variable moves it; EC2 is the region's endpoint unless moved.
func TestAWSEndpoints(t *testing.T) {
	env := &fakeEnv{}
	run(t, checkAWS, env, baseConfig)
	if len(env.reqs) != 1 || env.reqs[0] != "PUT 169.254.169.254 /latest/api/token" {
		t.Errorf("requests off AWS: %q, want only the token PUT", env.reqs)
	}
	env = &fakeEnv{aws: fakeAWS{role: "r"}}
	run(t, checkAWS, env, baseConfig)
	last := env.reqs[len(env.reqs)-1]
	if last != "POST ec2."+fakeRegion+".amazonaws.com /" {
		t.Errorf("EC2 request %q, want the region's endpoint", last)
	}
	// N9: the partition's domain, from IMDS services/domain, else from
	// the region (China: amazonaws.com.cn)
	for _, tc := range []struct{ region, domain, want string }{
		{"cn-north-1", "", "POST ec2.cn-north-1.amazonaws.com.cn /"},
		{"cn-northwest-1", "amazonaws.com.cn", "POST ec2.cn-northwest-1.amazonaws.com.cn /"},
		{"us-iso-east-1", "c2s.ic.gov", "POST ec2.us-iso-east-1.c2s.ic.gov /"},
		{"eu-west-1", "amazonaws.com", "POST ec2.eu-west-1.amazonaws.com /"},
	} {
		env = &fakeEnv{aws: fakeAWS{role: "r", region: tc.region, domain: tc.domain}}
		run(t, checkAWS, env, baseConfig)
		var ec2 []string
		for _, r := range env.reqs {
			if strings.HasPrefix(r, "POST ") {
				ec2 = append(ec2, r)
			}
		}
		if len(ec2) == 0 || slices.ContainsFunc(ec2, func(r string) bool { return r != tc.want }) {
			t.Errorf("region %s, domain %q: EC2 requests %q, want each %q", tc.region, tc.domain, ec2, tc.want)
		}
	}
}
