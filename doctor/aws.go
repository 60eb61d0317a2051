package doctor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
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
// destination check, and the AWS route quota of each peer (100 per VPC
// Route Server peer, 1,000 per Transit Gateway Connect peer).
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
			skip(idSDC, "needs the instance id"), quota(idQuota, s, routeServers{err: errors.New("the instance id is unknown")})}
	}
	region, err := m.get(ctx, "meta-data/placement/region")
	if err != nil {
		return []Result{warn(idInstance, "check the instance metadata options", "instance %s: region unknown: %v", id, err),
			skip(idSDC, "needs the region"), quota(idQuota, s, routeServers{err: errors.New("the region is unknown")})}
	}
	c, err := newEC2(ctx, s.env, m, region)
	var rs routeServers
	if err != nil {
		rs.err = err
	} else {
		rs = c.routeServers(ctx)
	}
	return []Result{
		pass(idInstance, "EC2 instance %s in %s (IMDSv2)", id, region),
		sourceDestCheck(ctx, c, err, idSDC, id),
		quota(idQuota, s, rs),
	}
}

// ec2Client calls the EC2 Query API of the instance's region, signed with
// the instance role's credentials from IMDS.
type ec2Client struct {
	env      Env
	endpoint string
	region   string
	role     string
	creds    awsCredentials
}

// newEC2 reads the instance role's credentials from IMDS and finds the
// region's EC2 endpoint; an error when the instance has no usable role.
func newEC2(ctx context.Context, env Env, m *imds, region string) (*ec2Client, error) {
	role, err := m.get(ctx, "meta-data/iam/security-credentials/")
	if err != nil || role == "" {
		return nil, fmt.Errorf("the instance has no IAM role (%v)", err)
	}
	role, _, _ = strings.Cut(role, "\n")
	raw, err := m.get(ctx, "meta-data/iam/security-credentials/"+role)
	if err != nil {
		return nil, fmt.Errorf("credentials of role %s: %w", role, err)
	}
	var creds awsCredentials
	if err := json.Unmarshal([]byte(raw), &creds); err != nil || creds.AccessKeyID == "" {
		return nil, fmt.Errorf("credentials of role %s do not parse", role)
	}
	return &ec2Client{env: env, endpoint: ec2Endpoint(ctx, env, m, region), region: region, role: role, creds: creds}, nil
}

// ec2Endpoint is AWS_ENDPOINT_URL_EC2, else https://ec2.REGION.DOMAIN with
// the partition's domain: what IMDS says at services/domain
// (amazonaws.com, amazonaws.com.cn in China, others in the isolated
// partitions), else amazonaws.com.cn for a cn- region and amazonaws.com
// for the others.
func ec2Endpoint(ctx context.Context, env Env, m *imds, region string) string {
	if e := strings.TrimRight(env.Getenv(envEC2), "/"); e != "" {
		return e
	}
	domain, err := m.get(ctx, "meta-data/services/domain")
	if err != nil || domain == "" || strings.ContainsAny(domain, "/: \t\n") {
		domain = "amazonaws.com"
		if strings.HasPrefix(region, "cn-") {
			domain = "amazonaws.com.cn"
		}
	}
	return "https://ec2." + region + "." + domain
}

// sourceDestCheck reads the instance's ENIs through the EC2 API
// (DescribeNetworkInterfaces): traffic to and from pod IPs is neither to
// nor from the ENI's addresses, and EC2 drops it while the check is on.
// IMDS does not expose the check, so without a role allowed to call the
// API (c nil, cerr why) the result is a warning with the fix to apply
// anyway.
func sourceDestCheck(ctx context.Context, c *ec2Client, cerr error, id, instance string) Result {
	fixUnknown := "aws ec2 modify-instance-attribute --instance-id " + instance + " --no-source-dest-check (and for every other ENI: aws ec2 modify-network-interface-attribute --network-interface-id ENI --no-source-dest-check)"
	if c == nil {
		return warn(id, fixUnknown, "cannot tell whether the source/destination check is off: %v", cerr)
	}
	enis, err := c.describeENIs(ctx, instance)
	if err != nil {
		return warn(id, fixUnknown+"; to let doctor check, allow ec2:DescribeNetworkInterfaces to role "+c.role,
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
func (c *ec2Client) describeENIs(ctx context.Context, instance string) ([]eni, error) {
	b, err := c.call(ctx, url.Values{
		"Action":           {"DescribeNetworkInterfaces"},
		"Version":          {"2016-11-15"},
		"Filter.1.Name":    {"attachment.instance-id"},
		"Filter.1.Value.1": {instance},
	})
	if err != nil {
		return nil, err
	}
	var out struct {
		Items []eni `xml:"networkInterfaceSet>item"`
	}
	if err := xml.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("EC2 DescribeNetworkInterfaces: answer does not parse: %w", err)
	}
	return out.Items, nil
}

// maxRouteServerPages bounds the pages of DescribeRouteServerEndpoints
// read (1,000 endpoints each).
const maxRouteServerPages = 20

// routeServers lists the region's VPC Route Server endpoints
// (DescribeRouteServerEndpoints, every page): their EniAddress is what a
// peer's address is when the peer is a Route Server endpoint.
func (c *ec2Client) routeServers(ctx context.Context) routeServers {
	addrs := map[netip.Addr]bool{}
	token := ""
	for range maxRouteServerPages {
		form := url.Values{"Action": {"DescribeRouteServerEndpoints"}, "Version": {"2016-11-15"}, "MaxResults": {"1000"}}
		if token != "" {
			form.Set("NextToken", token)
		}
		b, err := c.call(ctx, form)
		if err != nil {
			return routeServers{err: err, role: c.role}
		}
		var out struct {
			Items []struct {
				EniAddress string `xml:"eniAddress"`
				State      string `xml:"state"`
			} `xml:"routeServerEndpointSet>item"`
			NextToken string `xml:"nextToken"`
		}
		if err := xml.Unmarshal(b, &out); err != nil {
			return routeServers{err: fmt.Errorf("EC2 DescribeRouteServerEndpoints: answer does not parse: %w", err), role: c.role}
		}
		for _, e := range out.Items {
			if a, err := netip.ParseAddr(e.EniAddress); err == nil && e.State != "deleted" {
				addrs[a.Unmap()] = true
			}
		}
		if token = out.NextToken; token == "" {
			return routeServers{addrs: addrs, role: c.role}
		}
	}
	return routeServers{err: fmt.Errorf("EC2 DescribeRouteServerEndpoints: more than %d pages", maxRouteServerPages), role: c.role}
}

// call sends one EC2 Query API request (form) and returns the answer's
// body, or an error naming the action and EC2's error code.
func (c *ec2Client) call(ctx context.Context, form url.Values) ([]byte, error) {
	action := form.Get("Action")
	body := []byte(form.Encode())
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	signV4(req, body, c.creds, c.region, "ec2", time.Now())
	resp, err := c.env.HTTP(req)
	if err != nil {
		return nil, fmt.Errorf("EC2 %s at %s: %w", action, c.endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("EC2 %s: %w", action, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Errors []struct {
				Code    string `xml:"Code"`
				Message string `xml:"Message"`
			} `xml:"Errors>Error"`
		}
		if xml.Unmarshal(b, &e) == nil && len(e.Errors) > 0 {
			return nil, fmt.Errorf("EC2 %s: HTTP %d %s: %s", action, resp.StatusCode, e.Errors[0].Code, e.Errors[0].Message)
		}
		first, _ := bufio.NewReader(bytes.NewReader(b)).ReadString('\n')
		return nil, fmt.Errorf("EC2 %s: HTTP %d: %s", action, resp.StatusCode, strings.TrimSpace(first))
	}
	return b, nil
}

// routeServers is what EC2 says about the region's VPC Route Server
// endpoints: their addresses, or why they are unknown.
type routeServers struct {
	// addrs are the endpoints' EniAddress; nil when unknown.
	addrs map[netip.Addr]bool
	// err is why addrs is unknown.
	err error
	// role is the instance role that called EC2 ("" without one).
	role string
}

// AWS route quotas per BGP peer.
const (
	// routeServerQuota is what a VPC Route Server takes per peer.
	routeServerQuota = 100
	// connectQuota is what a Transit Gateway takes from the appliance per
	// Connect peer.
	connectQuota = 1000
)

// connectInside is the range of the Transit Gateway Connect peers' BGP
// addresses (each peer's inside CIDR is a /29 in it).
func connectInside() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{169, 254}), 16) }

// quota: AWS takes at most 100 routes per VPC Route Server peer and 1,000
// per Transit Gateway Connect peer. A Connect peer is one whose address is
// inside 169.254.0.0/16; a Route Server peer one whose address EC2 lists as
// an endpoint's EniAddress. When the endpoints cannot be listed, every
// other peer is assumed to be a Route Server endpoint, and the check only
// warns. A peer without maxAdvertised within its quota may be sent more;
// with the daemon running, the count it advertises now is compared too.
func quota(id string, s *state, rs routeServers) Result {
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
	assumed := false
	for i, p := range s.cfg.BGP.Peers {
		var kind string
		limit, confirmed := routeServerQuota, true
		switch a := p.Address.Unmap(); {
		case connectInside().Contains(a):
			kind, limit = "Transit Gateway Connect peer", connectQuota
		case rs.addrs == nil:
			kind, confirmed, assumed = "assumed to be a Route Server endpoint", false, true
		case rs.addrs[a]:
			kind = "Route Server endpoint"
		default:
			ok = append(ok, fmt.Sprintf("%s is neither a Route Server endpoint (EC2 lists %d) nor a Transit Gateway Connect peer: no AWS quota", p.Name, len(rs.addrs)))
			continue
		}
		n, known := advertised[p.Name]
		now := ""
		if known {
			now = fmt.Sprintf(", advertising %d now", n)
		}
		fix := fmt.Sprintf("bgp.peers[%d].maxAdvertised: %d", i, limit)
		switch {
		case known && n > limit && confirmed:
			fails = append(fails, fmt.Sprintf("%s (%s) advertises %d, above its quota of %d", p.Name, kind, n, limit))
			fixes = append(fixes, fix)
		case known && n > limit:
			warns = append(warns, fmt.Sprintf("%s (%s) advertises %d, above the quota of %d", p.Name, kind, n, limit))
			fixes = append(fixes, fix)
		case p.MaxAdvertised == 0 || p.MaxAdvertised > limit:
			cap := "no maxAdvertised"
			if p.MaxAdvertised > 0 {
				cap = fmt.Sprintf("maxAdvertised %d", p.MaxAdvertised)
			}
			warns = append(warns, fmt.Sprintf("%s (%s, quota %d) has %s%s", p.Name, kind, limit, cap, now))
			fixes = append(fixes, fix)
		default:
			ok = append(ok, fmt.Sprintf("%s (%s, quota %d): maxAdvertised %d%s", p.Name, kind, limit, p.MaxAdvertised, now))
		}
	}
	why := ""
	fix := strings.Join(fixes, "; ") + " (and aggregateLength on egressIP/loadBalancerIP rules)"
	if assumed {
		why = "; Route Server endpoints not confirmed: " + oneLine(rs.err.Error())
		allow := "to let doctor confirm Route Server endpoints, allow ec2:DescribeRouteServerEndpoints to the instance role"
		if rs.role != "" {
			allow += " " + rs.role
		}
		fix += "; " + allow
	}
	switch {
	case len(fails) > 0:
		return fail(id, fix, "above the AWS route quota: %s%s", strings.Join(append(fails, warns...), "; "), why)
	case len(warns) > 0:
		return warn(id, fix, "AWS takes at most %d routes per VPC Route Server peer and %d per Transit Gateway Connect peer: %s%s",
			routeServerQuota, connectQuota, strings.Join(warns, "; "), why)
	}
	return pass(id, "every peer fits its AWS quota: %s%s", strings.Join(ok, "; "), why)
}
