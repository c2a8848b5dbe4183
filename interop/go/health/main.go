// Command health is grpc-go's health client (grpc.health.v1.Health, the
// generated client of google.golang.org/grpc/health/grpc_health_v1, and
// grpc-go's client-side health checking), for interop tests of llmgw-wire's
// Python control plane: what a grpc-go agent or a Kubernetes probe written
// in Go sees of its health service. Modes:
//
//	check    Check each --service (the flag repeats; "" is the server), in order
//	watch    Watch one --service, printing each status it receives, until the
//	         call ends, --timeout passes, or --count statuses have arrived
//	balance  dial every --target on one channel (round_robin) with a service
//	         config whose healthCheckConfig names --service, so that the
//	         channel avoids an address that is not SERVING, then make --calls
//	         Check calls of "" on it, waiting for a ready address
//	states   dial one --target as balance does, then print the channel's
//	         state: READY once it is, LEFT_READY each time it leaves READY,
//	         READY again once it is back, until --count departures
//
// Output, one event per line on stdout: PEER <address> (balance) for the
// address that answered a call; STATE <state> (states); HEALTH <status> for each status received,
// as grpc's ServingStatus names it (SERVING, NOT_SERVING, SERVICE_UNKNOWN);
// STATUS <code> [<message>] when a call ends, the code as grpcio names it
// (a Check that was answered ends with STATUS OK). A watch ended by --count
// prints no STATUS: the program cancels it and exits.
//
// The exit code is 0 when every call ran to its end (its STATUS line,
// whatever its code: the test judges it) or --count was reached, 1 when the
// channel could not be set up, 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	_ "google.golang.org/grpc/health" // client-side health checking (balance, states)
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"llmgwinterop/peer"
)

// stringsFlag is a flag that may be given more than once.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	var targets, services stringsFlag
	flag.Var(&targets, "target", "control plane address, e.g. 127.0.0.1:50051 (balance: give it once per address)")
	mode := flag.String("mode", "check", "check, watch, balance or states")
	flag.Var(&services, "service", `service name ("" is the server); check: give it once per Check`)
	count := flag.Int("count", 0, "watch: exit after this many statuses (0: when the call ends); states: after this many departures from READY")
	calls := flag.Int("calls", 1, "balance: how many Check calls to make")
	timeout := flag.Duration("timeout", 60*time.Second, "deadline of every call together")
	flag.Parse()

	if len(targets) == 0 || (*mode != "balance" && len(targets) > 1) {
		peer.Logf("health: give --target once (balance: once or more)")
		return 2
	}
	if len(services) == 0 {
		services = stringsFlag{""}
	}
	if *mode != "check" && len(services) > 1 {
		peer.Logf("health: --mode %s takes one --service", *mode)
		return 2
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var conn *grpc.ClientConn
	var err error
	switch *mode {
	case "check", "watch":
		conn, err = grpc.Dial(targets[0], grpc.WithInsecure())
	case "balance", "states":
		conn, err = dialBalanced(targets, services[0])
	default:
		peer.Logf("health: --mode %q: expected check, watch, balance or states", *mode)
		return 2
	}
	if err != nil {
		peer.Logf("health: dial %s: %v", targets, err)
		return 1
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	switch *mode {
	case "check":
		for _, s := range services {
			check(ctx, client, s, false)
		}
	case "watch":
		watch(ctx, client, services[0], *count)
	case "balance":
		for i := 0; i < *calls; i++ {
			check(ctx, client, "", true)
		}
	case "states":
		states(ctx, conn, *count)
	}
	return 0
}

// dialBalanced gives a channel over every target, which grpc-go's
// round_robin balances over the addresses its health checks say are SERVING
// for service (a Watch of it on each address).
func dialBalanced(targets []string, service string) (*grpc.ClientConn, error) {
	addrs := make([]resolver.Address, len(targets))
	for i, t := range targets {
		addrs[i] = resolver.Address{Addr: t}
	}
	r := manual.NewBuilderWithScheme("llmgw-health")
	r.InitialState(resolver.State{Addresses: addrs})
	name, err := json.Marshal(service)
	if err != nil {
		return nil, err
	}
	config := fmt.Sprintf(
		`{"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": %s}}`, name)
	return grpc.Dial(r.Scheme()+":///control-planes",
		grpc.WithInsecure(), grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(config))
}

// check makes one Check call. Balanced, it waits for an address that is
// connected and SERVING (WaitForReady) rather than failing at once, and says
// which address answered.
func check(ctx context.Context, client healthpb.HealthClient, service string, balanced bool) {
	var answeredBy grpcpeer.Peer
	var opts []grpc.CallOption
	if balanced {
		opts = append(opts, grpc.WaitForReady(true), grpc.Peer(&answeredBy))
	}
	answer, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, opts...)
	if answeredBy.Addr != nil {
		peer.Line("PEER", answeredBy.Addr.String())
	}
	if err == nil {
		peer.Line("HEALTH", answer.GetStatus().String())
	}
	end(err)
}

// watch prints each status of service until the call ends or count
// statuses have arrived.
func watch(ctx context.Context, client healthpb.HealthClient, service string, count int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		end(err)
		return
	}
	for seen := 0; count == 0 || seen < count; seen++ {
		answer, err := stream.Recv()
		if err == io.EOF {
			end(nil)
			return
		}
		if err != nil {
			end(err)
			return
		}
		peer.Line("HEALTH", answer.GetStatus().String())
	}
}

// states prints READY once the channel is READY (its address connected and
// its health check SERVING), then LEFT_READY each time it leaves READY and
// READY once it is back, until count departures have been seen. A state that
// the channel leaves and comes back to between two looks is not seen: the
// next departure is.
func states(ctx context.Context, conn *grpc.ClientConn, count int) {
	for left := 0; ; left++ {
		for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
			if !conn.WaitForStateChange(ctx, s) {
				end(ctx.Err())
				return
			}
		}
		peer.Line("STATE", "READY")
		if left == count {
			return
		}
		if !conn.WaitForStateChange(ctx, connectivity.Ready) {
			end(ctx.Err())
			return
		}
		peer.Line("STATE", "LEFT_READY")
	}
}

// end prints how a call ended.
func end(err error) {
	s := status.Convert(err)
	args := []string{peer.CodeName(s.Code())}
	if s.Message() != "" {
		args = append(args, peer.OneLine(s.Message()))
	}
	peer.Line("STATUS", args...)
}
