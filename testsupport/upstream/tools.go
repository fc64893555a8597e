//go:build tools

// Package tools pins the Go programs build.sh compiles: upstream agent-sandbox's controller,
// end-to-end suites and sandboxd daemon (for the image its test runs), and kwok, which
// simulates a node for them. Nothing here is built into Rouse.
package tools

import (
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
	_ "sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd"
	_ "sigs.k8s.io/agent-sandbox/test/e2e/framework"
	_ "sigs.k8s.io/kwok/cmd/kwok"

	// Imported only by upstream's test files, which `go mod tidy` does not follow in a
	// dependency; listed so that go.sum covers `go test -c` of test/e2e/extensions.
	_ "github.com/stretchr/testify/require"
	_ "google.golang.org/grpc"
	_ "k8s.io/client-go/tools/remotecommand"
)
