package doctor

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
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
		fmt.Fprint(w, fakeRegion)
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
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+fakeKey+"/") || !strings.Contains(auth, "/"+fakeRegion+"/ec2/aws4_request") ||
		r.Header.Get("X-Amz-Security-Token") != "session" || !strings.HasPrefix(r.Header.Get("X-Amz-Date"), day[:6]) {
		http.Error(w, "<Response><Errors><Error><Code>AuthFailure</Code><Message>unsigned</Message></Error></Errors></Response>", http.StatusUnauthorized)
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

func anENI(id, dev string, check bool) eni {
	e := eni{ID: id, SourceDestCheck: check}
	e.Attachment.DeviceIndex = dev
	return e
}

func TestCheckAWS(t *testing.T) {
	capped := strings.Replace(baseConfig, "asn: 65001}", "asn: 65001, maxAdvertised: 100}", 1)
	ec2 := map[string]string{envEC2: "http://ec2.test"}
	offOK := []eni{anENI("eni-1", "0", false), anENI("eni-2", "1", false)}
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
		{"all good", &fakeEnv{aws: fakeAWS{role: "node-role", enis: offOK}, env: ec2}, capped,
			[]string{"pass:EC2 instance i-0abc in eu-west-1", "pass:off on eni-1 (device 0), eni-2 (device 1)", "pass:tor-a (maxAdvertised 100)"}},
		{"check on", &fakeEnv{aws: fakeAWS{role: "node-role", enis: []eni{anENI("eni-1", "0", false), anENI("eni-2", "1", true)}}, env: ec2}, capped,
			[]string{"pass:", "fail:on for eni-2 (device 1)", "pass:"}},
		{"no role", &fakeEnv{aws: fakeAWS{enis: offOK}, env: ec2}, capped, []string{"pass:", "warn:no IAM role", "pass:"}},
		{"role not allowed", &fakeEnv{aws: fakeAWS{role: "r", ec2Error: "UnauthorizedOperation"}, env: ec2}, capped,
			[]string{"pass:", "warn:HTTP 403 UnauthorizedOperation", "pass:"}},
		{"no cap", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK}, env: ec2}, baseConfig, []string{"pass:", "pass:", "warn:tor-a has no maxAdvertised"}},
		{"cap above quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK}, env: ec2}, strings.Replace(capped, "maxAdvertised: 100", "maxAdvertised: 150", 1),
			[]string{"pass:", "pass:", "warn:tor-a has maxAdvertised 150"}},
		{"daemon advertises above quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK}, env: ec2, daemon: &DaemonView{Peers: []model.PeerStatus{
			{Name: "tor-a", Families: []model.FamilyCounts{{Family: "ipv4", Advertised: 90}, {Family: "ipv6", Advertised: 30}}}}}}, baseConfig,
			[]string{"pass:", "pass:", "fail:tor-a advertises 120"}},
		{"daemon within quota", &fakeEnv{aws: fakeAWS{role: "r", enis: offOK}, env: ec2, daemon: &DaemonView{Peers: []model.PeerStatus{
			{Name: "tor-a", Families: []model.FamilyCounts{{Family: "ipv4", Advertised: 7}}}}}}, capped,
			[]string{"pass:", "pass:", "pass:advertising 7 now"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkAWS, tc.env, tc.doc), tc.want...) })
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
}
