package doctor

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignV4Vectors checks the signer against AWS's published examples
// (Signature Version 4 test suite "get-vanilla", and the IAM ListUsers
// example of the signing documentation).
func TestSignV4Vectors(t *testing.T) {
	now := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	creds := awsCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	for _, tc := range []struct {
		name, url, service, contentType, want string
	}{
		{"get-vanilla", "https://example.amazonaws.com/", "service", "",
			"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"iam-listusers", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", "iam", "application/x-www-form-urlencoded; charset=utf-8",
			"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			signV4(req, nil, creds, "us-east-1", tc.service, now)
			if got := req.Header.Get("Authorization"); got != tc.want {
				t.Errorf("Authorization:\n got %s\nwant %s", got, tc.want)
			}
			if got := req.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
				t.Errorf("X-Amz-Date = %s", got)
			}
		})
	}
	// a session token is signed and sent
	req, _ := http.NewRequest(http.MethodPost, "https://ec2.eu-west-1.amazonaws.com/", strings.NewReader("Action=X"))
	signV4(req, []byte("Action=X"), awsCredentials{AccessKeyID: "A", SecretAccessKey: "S", Token: "TOK"}, "eu-west-1", "ec2", now)
	if req.Header.Get("X-Amz-Security-Token") != "TOK" || !strings.Contains(req.Header.Get("Authorization"), "x-amz-security-token") {
		t.Errorf("session token not signed: %v", req.Header)
	}
}
