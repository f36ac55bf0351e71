// Command authenticate answers, as the AWS IAM Authenticator of an EKS cluster in its ConfigMap
// mode would, who the caller of an AWS identity is to Kubernetes: it maps the identity through
// the aws-auth ConfigMap with the authenticator's own code (sigs.k8s.io/aws-iam-authenticator,
// the release go.mod pins) and renders the mapping's username and groups. The bed's node
// stand-in asks it whether an instance's kubelet would be let in, so that aws-auth, not a test,
// decides whether a node joins. Reads one request as JSON on stdin, writes one answer on stdout.
//
// Request:  {"arn": "arn:aws:sts::ACCOUNT:assumed-role/ROLE/i-...", "accessKeyID": "...",
//            "privateDNSName": "ip-...", "data": {aws-auth's data}}
// Answer:   {"username": "...", "groups": [...]} or {"error": "..."}.
//
// What is the authenticator's code and what is said again here:
//   - the ARN's canonical form: pkg/arn Canonicalize (an assumed role becomes its IAM role,
//     without the path an STS ARN never carries);
//   - the parse of aws-auth: pkg/mapper/configmap ParseMap, whose good entries are kept when
//     others fail, as its watch does (configmap.go startLoadConfigMap);
//   - which entry matches: config.RoleMapping.Matches and UserMapping.Matches, over entries keyed
//     by their Key() as MapStore.saveMap keys them (a later duplicate replaces an earlier one);
//   - said again, from pkg/server/server.go, because they are methods of its unexported handler:
//     doMapping's order (roles, then users, then mapAccounts) and renderTemplate's placeholders.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/aws-iam-authenticator/pkg/arn"
	"sigs.k8s.io/aws-iam-authenticator/pkg/config"
	"sigs.k8s.io/aws-iam-authenticator/pkg/mapper/configmap"
)

type request struct {
	ARN            string            `json:"arn"`
	AccessKeyID    string            `json:"accessKeyID"`
	PrivateDNSName string            `json:"privateDNSName"`
	Data           map[string]string `json:"data"`
}

type answer struct {
	Username string   `json:"username,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// server.go's instanceIDPattern.
var instanceIDPattern = regexp.MustCompile(`^i-(\w{8}|\w{17})$`)

func main() {
	var req request
	out := json.NewEncoder(os.Stdout)
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		_ = out.Encode(answer{Error: fmt.Sprintf("reading the request: %v", err)})
		os.Exit(2)
	}
	username, groups, err := authenticate(req)
	if err != nil {
		_ = out.Encode(answer{Error: err.Error()})
		return
	}
	_ = out.Encode(answer{Username: username, Groups: groups})
}

func authenticate(req request) (string, []string, error) {
	_, canonical, err := arn.Canonicalize(req.ARN)
	if err != nil {
		return "", nil, err
	}
	// The STS ARN's account and session name (token.Identity's AccountID and SessionName).
	parts := strings.SplitN(req.ARN, ":", 6)
	if len(parts) < 6 {
		return "", nil, fmt.Errorf("arn %q has no account", req.ARN)
	}
	account := parts[4]
	session := ""
	if resource := strings.Split(parts[5], "/"); len(resource) > 2 && resource[0] == "assumed-role" {
		session = resource[len(resource)-1]
	}

	users, roles, accounts, parseErr := configmap.ParseMap(req.Data)
	if parseErr != nil {
		fmt.Fprintf(os.Stderr, "authenticate: aws-auth parsed with errors, good entries kept: %v\n", parseErr)
	}
	roleByKey := map[string]config.RoleMapping{}
	for _, r := range roles {
		roleByKey[r.Key()] = r
	}
	userByKey := map[string]config.UserMapping{}
	for _, u := range users {
		userByKey[u.Key()] = u
	}

	subject := strings.ToLower(canonical)
	var username string
	var groupPatterns []string
	found := false
	for _, r := range roleByKey {
		if r.Matches(subject) {
			username, groupPatterns, found = r.Username, r.Groups, true
			break
		}
	}
	if !found {
		for _, u := range userByKey {
			if u.Matches(subject) {
				username, groupPatterns, found = u.Username, u.Groups, true
				break
			}
		}
	}
	if !found {
		for _, a := range accounts {
			if a == account {
				return canonical, []string{}, nil
			}
		}
		return "", nil, fmt.Errorf("ARN is not mapped (%s)", subject)
	}

	render := func(template string) (string, error) {
		if strings.Contains(template, "{{EC2PrivateDNSName}}") {
			if !instanceIDPattern.MatchString(session) {
				return "", fmt.Errorf("SessionName did not contain an instance id")
			}
			if req.PrivateDNSName == "" {
				return "", fmt.Errorf("instance %s has no private DNS name", session)
			}
			template = strings.ReplaceAll(template, "{{EC2PrivateDNSName}}", req.PrivateDNSName)
		}
		template = strings.ReplaceAll(template, "{{AccountID}}", account)
		template = strings.ReplaceAll(template, "{{SessionName}}", strings.ReplaceAll(session, "@", "-"))
		template = strings.ReplaceAll(template, "{{SessionNameRaw}}", session)
		template = strings.ReplaceAll(template, "{{AccessKeyID}}", req.AccessKeyID)
		return template, nil
	}
	user, err := render(username)
	if err != nil {
		return "", nil, fmt.Errorf("error rendering username template %q: %s", username, err)
	}
	groups := []string{}
	for _, g := range groupPatterns {
		rendered, err := render(g)
		if err != nil {
			return "", nil, fmt.Errorf("error rendering group template %q: %s", g, err)
		}
		groups = append(groups, rendered)
	}
	return user, groups, nil
}
