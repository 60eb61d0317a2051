package doctor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// AWS endpoints, and the environment variables that move them (the names
// the AWS SDKs read; tests serve fakes).
const (
	defaultIMDS = "http://169.254.169.254"
	envIMDS     = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
	envIMDSOff  = "AWS_EC2_METADATA_DISABLED"
	envEC2      = "AWS_ENDPOINT_URL_EC2"
	// envIMDSTimeout replaces IMDSTimeout (seconds, as the AWS CLI reads
	// it): for a metadata service known to be slow.
	envIMDSTimeout = "AWS_METADATA_SERVICE_TIMEOUT"
	// routeServerQuota is the routes a VPC Route Server takes per peer.
	routeServerQuota = 100
	// awsTimeout bounds each request after the IMDS token answered.
	awsTimeout = 5 * time.Second
)

// imds is an IMDSv2 session.
type imds struct {
	env   Env
	base  string
	token string
}

func (m *imds) get(ctx context.Context, p string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/latest/"+p, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-aws-ec2-metadata-token", m.token)
	return readOK(m.env.HTTP(req))
}

// readOK reads a response body (capped), or says why it is not a 200.
func readOK(resp *http.Response, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s %s: HTTP %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode)
	}
	return strings.TrimSpace(string(b)), nil
}

// imdsTimeout is IMDSTimeout, or AWS_METADATA_SERVICE_TIMEOUT's seconds.
func imdsTimeout(env Env) (time.Duration, error) {
	v := env.Getenv(envIMDSTimeout)
	if v == "" {
		return IMDSTimeout, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs <= 0 || secs > 600 {
		return 0, fmt.Errorf("%s=%q is not a number of seconds (0..600)", envIMDSTimeout, v)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// openIMDS asks for an IMDSv2 token within timeout: no answer means this
// is not an EC2 instance (or IMDS is off).
func openIMDS(ctx context.Context, env Env, timeout time.Duration) (*imds, error) {
	base := strings.TrimRight(env.Getenv(envIMDS), "/")
	if base == "" {
		base = defaultIMDS
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
	tok, err := readOK(env.HTTP(req))
	if err != nil {
		return nil, fmt.Errorf("no IMDSv2 answer from %s within %v: %w", base, timeout, err)
	}
	return &imds{env: env, base: base, token: tok}, nil
}

// checkAWS: on EC2 (IMDSv2 answers), the instance, its ENIs' source/
// destination check, and the VPC Route Server's 100-routes-per-peer quota.
func checkAWS(ctx context.Context, s *state) []Result {
	const (
		idInstance = "aws-instance"
		idSDC      = "aws-source-dest-check"
		idQuota    = "aws-route-server-quota"
	)
	if v := s.env.Getenv(envIMDSOff); strings.EqualFold(v, "true") {
		why := envIMDSOff + "=true"
		return []Result{skip(idInstance, "%s", why), skip(idSDC, "%s", why), skip(idQuota, "%s", why)}
	}
	timeout, err := imdsTimeout(s.env)
	if err != nil {
		return []Result{warn(idInstance, "unset "+envIMDSTimeout+", or give it a number of seconds", "%v", err),
			skip(idSDC, "needs IMDS"), skip(idQuota, "needs IMDS")}
	}
	m, err := openIMDS(ctx, s.env, timeout)
	if err != nil {
		why := "not on AWS: " + oneLine(err.Error())
		return []Result{skip(idInstance, "%s", why), skip(idSDC, "not on AWS"), skip(idQuota, "not on AWS")}
	}
	id, err := m.get(ctx, "meta-data/instance-id")
	if err != nil {
		return []Result{warn(idInstance, "check the instance metadata options (http-tokens, hop limit)", "IMDSv2 answers but the instance id does not: %v", err),
			skip(idSDC, "needs the instance id"), quota(idQuota, s)}
	}
	region, err := m.get(ctx, "meta-data/placement/region")
	if err != nil {
		return []Result{warn(idInstance, "check the instance metadata options", "instance %s: region unknown: %v", id, err),
			skip(idSDC, "needs the region"), quota(idQuota, s)}
	}
	return []Result{
		pass(idInstance, "EC2 instance %s in %s (IMDSv2)", id, region),
		sourceDestCheck(ctx, s.env, m, idSDC, id, region),
		quota(idQuota, s),
	}
}

// sourceDestCheck reads the instance's ENIs through the EC2 API
// (DescribeNetworkInterfaces, signed with the instance role's credentials
// from IMDS): traffic to and from pod IPs is neither to nor from the ENI's
// addresses, and EC2 drops it while the check is on. IMDS does not expose
// the check, so without a role allowed to call the API the result is a
// warning with the fix to apply anyway.
func sourceDestCheck(ctx context.Context, env Env, m *imds, id, instance, region string) Result {
	fixUnknown := "aws ec2 modify-instance-attribute --instance-id " + instance + " --no-source-dest-check (and for every other ENI: aws ec2 modify-network-interface-attribute --network-interface-id ENI --no-source-dest-check)"
	role, err := m.get(ctx, "meta-data/iam/security-credentials/")
	if err != nil || role == "" {
		return warn(id, fixUnknown, "cannot tell whether the source/destination check is off: the instance has no IAM role (%v)", err)
	}
	role, _, _ = strings.Cut(role, "\n")
	raw, err := m.get(ctx, "meta-data/iam/security-credentials/"+role)
	if err != nil {
		return warn(id, fixUnknown, "cannot tell whether the source/destination check is off: credentials of role %s: %v", role, err)
	}
	var creds awsCredentials
	if err := json.Unmarshal([]byte(raw), &creds); err != nil || creds.AccessKeyID == "" {
		return warn(id, fixUnknown, "cannot tell whether the source/destination check is off: credentials of role %s do not parse", role)
	}
	enis, err := describeENIs(ctx, env, creds, instance, region)
	if err != nil {
		return warn(id, fixUnknown+"; to let doctor check, allow ec2:DescribeNetworkInterfaces to role "+role,
			"cannot tell whether the source/destination check is off: %s", oneLine(err.Error()))
	}
	if len(enis) == 0 {
		return warn(id, fixUnknown, "EC2 lists no network interface attached to %s", instance)
	}
	var on, off []string
	var fixes []string
	for _, e := range enis {
		name := fmt.Sprintf("%s (device %s)", e.ID, e.Attachment.DeviceIndex)
		if e.SourceDestCheck {
			on = append(on, name)
			fixes = append(fixes, "aws ec2 modify-network-interface-attribute --network-interface-id "+e.ID+" --no-source-dest-check")
		} else {
			off = append(off, name)
		}
	}
	if len(on) > 0 {
		return fail(id, strings.Join(fixes, "; "), "the source/destination check is on for %s: EC2 drops traffic to and from pod IPs there", strings.Join(on, ", "))
	}
	return pass(id, "the source/destination check is off on %s", strings.Join(off, ", "))
}

// eni is one item of DescribeNetworkInterfaces.
type eni struct {
	ID              string `xml:"networkInterfaceId"`
	SourceDestCheck bool   `xml:"sourceDestCheck"`
	Attachment      struct {
		DeviceIndex string `xml:"deviceIndex"`
	} `xml:"attachment"`
}

// describeENIs calls EC2 DescribeNetworkInterfaces for the ENIs attached
// to instance.
func describeENIs(ctx context.Context, env Env, creds awsCredentials, instance, region string) ([]eni, error) {
	endpoint := strings.TrimRight(env.Getenv(envEC2), "/")
	if endpoint == "" {
		endpoint = "https://ec2." + region + ".amazonaws.com"
	}
	form := url.Values{
		"Action":           {"DescribeNetworkInterfaces"},
		"Version":          {"2016-11-15"},
		"Filter.1.Name":    {"attachment.instance-id"},
		"Filter.1.Value.1": {instance},
	}
	body := []byte(form.Encode())
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	signV4(req, body, creds, region, "ec2", time.Now())
	resp, err := env.HTTP(req)
	if err != nil {
		return nil, fmt.Errorf("EC2 DescribeNetworkInterfaces at %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Errors []struct {
				Code    string `xml:"Code"`
				Message string `xml:"Message"`
			} `xml:"Errors>Error"`
		}
		if xml.Unmarshal(b, &e) == nil && len(e.Errors) > 0 {
			return nil, fmt.Errorf("EC2 DescribeNetworkInterfaces: HTTP %d %s: %s", resp.StatusCode, e.Errors[0].Code, e.Errors[0].Message)
		}
		first, _ := bufio.NewReader(bytes.NewReader(b)).ReadString('\n')
		return nil, fmt.Errorf("EC2 DescribeNetworkInterfaces: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(first))
	}
	var out struct {
		Items []eni `xml:"networkInterfaceSet>item"`
	}
	if err := xml.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("EC2 DescribeNetworkInterfaces: answer does not parse: %w", err)
	}
	return out.Items, nil
}

// quota: an AWS VPC Route Server takes at most 100 routes per peer. A peer
// without maxAdvertised ≤ 100 may be sent more; with the daemon running,
// the count it advertises now is compared too.
func quota(id string, s *state) Result {
	if s.cfg == nil {
		return needConfig(id)[0]
	}
	advertised := map[string]int{}
	if s.daemon != nil {
		for _, p := range s.daemon.Peers {
			for _, f := range p.Families {
				advertised[p.Name] += f.Advertised
			}
		}
	}
	var warns, fails, ok []string
	var fixes []string
	for i, p := range s.cfg.BGP.Peers {
		n, known := advertised[p.Name]
		now := ""
		if known {
			now = fmt.Sprintf(", advertising %d now", n)
		}
		switch {
		case known && n > routeServerQuota:
			fails = append(fails, fmt.Sprintf("%s advertises %d", p.Name, n))
			fixes = append(fixes, fmt.Sprintf("bgp.peers[%d].maxAdvertised: %d", i, routeServerQuota))
		case p.MaxAdvertised == 0 || p.MaxAdvertised > routeServerQuota:
			cap := "no maxAdvertised"
			if p.MaxAdvertised > 0 {
				cap = fmt.Sprintf("maxAdvertised %d", p.MaxAdvertised)
			}
			warns = append(warns, fmt.Sprintf("%s has %s%s", p.Name, cap, now))
			fixes = append(fixes, fmt.Sprintf("bgp.peers[%d].maxAdvertised: %d", i, routeServerQuota))
		default:
			ok = append(ok, fmt.Sprintf("%s (maxAdvertised %d%s)", p.Name, p.MaxAdvertised, now))
		}
	}
	fix := strings.Join(fixes, "; ") + " for each peer that is a VPC Route Server endpoint (and aggregateLength on egressIP/loadBalancerIP rules)"
	switch {
	case len(fails) > 0:
		return fail(id, fix, "above the VPC Route Server quota of %d routes per peer: %s", routeServerQuota, strings.Join(append(fails, warns...), "; "))
	case len(warns) > 0:
		return warn(id, fix, "a VPC Route Server takes %d routes per peer, and %s", routeServerQuota, strings.Join(warns, "; "))
	}
	return pass(id, "every peer fits the VPC Route Server quota of %d routes: %s", routeServerQuota, strings.Join(ok, ", "))
}
