// Command controlplane is a control plane's end of the llmgw agent stream on
// grpc-go, for interop tests of llmgw-wire's Python agent. Each --scenario is
// one behaviour of a real control plane that the Python side must survive:
//
//	graceful  on the first Register: Ack, StartShard, StopShard, then
//	          GracefulStop (GOAWAY); the call ends with OK
//	status    on the first Register: Ack, then the call ends with
//	          FAILED_PRECONDITION and the server stops at once
//	serve     on every Register: Ack and StartShard; serves until stdin
//	          closes or SIGTERM, then ends every call with OK
//	bad-then-good
//	          as serve, but on every Register: Ack, a StartShard valid for Go
//	          that the Python domain cannot hold (startup_timeout_ms of
//	          2^63-1), then a valid StopShard and a valid StartShard
//
// --start-padding adds that many bytes to every StartShard (an engine
// argument), for messages over a receiver's size limit. --quiet leaves out
// the RECV, SENT and END lines, for a load run, where printing every message
// would cost more than serving it.
//
// Output, one event per line on stdout: LISTENING <port>; per call ENCODING
// <grpc-encoding the agent sent>; RECV <protojson> for every AgentMessage;
// SENT <protojson> for every ControlMessage; END <code> [<message>] when a
// call's handler ends; DONE when the server has stopped cleanly.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip from agents, and answer in kind
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	llmgwv1 "llmgwinterop/gen/llmgwv1"
	"llmgwinterop/peer"
)

// The status the status scenario ends its call with.
const statusMessage = "node is cordoned: registration refused by the control plane"

// The api_key every StartShard carries; a test compares its hash (the
// peers never print a key).
const apiKey = "interop-api-key-0123456789"

// How long a graceful call lingers after GracefulStop began, for the agent to
// half-close or send what it still has (logged as RECV); then it ends with
// OK regardless, since GracefulStop waits for every call to end.
const drainWindow = 500 * time.Millisecond

type controlPlane struct {
	llmgwv1.UnimplementedAgentServiceServer

	scenario   string
	quiet      bool
	srv        *grpc.Server
	padding    int
	badTimeout int64

	// quit is closed when the server begins to stop: serving handlers end
	// their calls with OK.
	quit     chan struct{}
	quitOnce sync.Once
	// stopped is closed once GracefulStop or Stop has returned.
	stopped  chan struct{}
	stopOnce sync.Once
	// triggered is set by the first Register of a one-shot scenario.
	mu        sync.Mutex
	triggered bool
	// open and done count the calls begun and ended (their status handed
	// to the transport); watch counts the statuses written to a socket.
	open, done int
	watch      *trailerWatch
}

func (c *controlPlane) callBegan() {
	c.mu.Lock()
	c.open++
	c.mu.Unlock()
}

func (c *controlPlane) callEnded() {
	c.mu.Lock()
	c.done++
	c.mu.Unlock()
}

// ended gives how many calls have ended.
func (c *controlPlane) ended() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

func (c *controlPlane) calls() (open, ended int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open - c.done, c.done
}

func (c *controlPlane) beginQuit() { c.quitOnce.Do(func() { close(c.quit) }) }

// stop stops the server once, gracefully or not, in the background.
func (c *controlPlane) stop(graceful bool) {
	c.stopOnce.Do(func() {
		c.beginQuit()
		go func() {
			defer close(c.stopped)
			if !graceful {
				c.srv.Stop()
				return
			}
			drained := make(chan struct{})
			go func() {
				c.srv.GracefulStop()
				close(drained)
			}()
			// GracefulStop returns once the agents have closed their
			// connections; grpc-go 1.33 does not close a drained one itself
			// when its last call ended after the second GOAWAY. Once every
			// call has ended and its status is on the wire, close what the
			// agents left open: nothing is left to deliver on it.
			for {
				open, ended := c.calls()
				if open == 0 {
					// A call the agent cancelled has no status to wait for:
					// the wait is bounded.
					c.watch.waitFor(ended, 10*time.Second)
					break
				}
				select {
				case <-drained:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			select {
			case <-drained:
			case <-time.After(time.Second):
				peer.Logf("controlplane: every call has ended; closing the connections the agents left open")
				c.srv.Stop()
				<-drained
			}
		}()
	})
}

// firstRegister says whether this is the Register that starts a one-shot
// scenario; later streams are only logged.
func (c *controlPlane) firstRegister() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.triggered
	c.triggered = true
	return first
}

func (c *controlPlane) Connect(stream llmgwv1.AgentService_ConnectServer) (err error) {
	defer func() {
		if c.quiet {
			return
		}
		st := status.Convert(err)
		if st.Message() == "" {
			peer.Line("END", peer.CodeName(st.Code()))
		} else {
			peer.Line("END", peer.CodeName(st.Code()), peer.OneLine(st.Message()))
		}
	}()
	ctx := stream.Context()
	msgs := make(chan *llmgwv1.AgentMessage)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if !c.quiet {
				peer.Line("RECV", peer.JSON(m))
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	send := func(m *llmgwv1.ControlMessage) error {
		if err := stream.Send(m); err != nil {
			return err
		}
		if !c.quiet {
			peer.Line("SENT", peer.JSON(m))
		}
		return nil
	}
	for {
		select {
		case m := <-msgs:
			r := m.GetRegister()
			if r == nil {
				continue
			}
			switch c.scenario {
			case "graceful":
				if !c.firstRegister() {
					continue
				}
				for _, out := range []*llmgwv1.ControlMessage{ack(r), c.start(r), stop(r)} {
					if err := send(out); err != nil {
						return err
					}
				}
				c.stop(true)
				select {
				case <-recvErr:
				case <-time.After(drainWindow):
				}
				return nil
			case "status":
				if !c.firstRegister() {
					continue
				}
				if err := send(ack(r)); err != nil {
					return err
				}
				// The server stops in the stats handler, once this status
				// has been handed to the transport.
				return status.Error(codes.FailedPrecondition, statusMessage)
			case "serve", "bad-then-good":
				msgs := []*llmgwv1.ControlMessage{ack(r), c.start(r)}
				if c.scenario == "bad-then-good" {
					bad := c.start(r)
					bad.GetStartShard().StartupTimeoutMs = c.badTimeout
					bad.GetStartShard().ShardId = r.GetNodeId() + "-bad"
					msgs = []*llmgwv1.ControlMessage{ack(r), bad, stop(r), c.start(r)}
				}
				for _, out := range msgs {
					if err := send(out); err != nil {
						return err
					}
				}
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-c.quit:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// stopAfterStatus stops the server as soon as the status scenario's call has
// ended: grpc-go reports stats.End after it handed the status to the
// transport, so the status goes out just before the connection closes.
type stopAfterStatus struct {
	peer.EncodingLogger
	c *controlPlane
}

func (h stopAfterStatus) HandleRPC(ctx context.Context, s stats.RPCStats) {
	h.EncodingLogger.HandleRPC(ctx, s)
	switch s.(type) {
	case *stats.Begin:
		h.c.callBegan()
	case *stats.End:
		h.c.callEnded()
	}
	if end, ok := s.(*stats.End); ok && h.c.scenario == "status" &&
		status.Code(end.Error) == codes.FailedPrecondition {
		// Stop closes the sockets at once: first let the status reach one.
		ended := h.c.ended()
		go func() {
			h.c.watch.waitFor(ended, 10*time.Second)
			h.c.stop(false)
		}()
	}
}

func ack(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	return &llmgwv1.ControlMessage{Msg: &llmgwv1.ControlMessage_Ack{Ack: &llmgwv1.Ack{
		NodeId:        r.GetNodeId(),
		AdoptedShards: int32(len(r.GetRunningShards())),
		Detail:        "registered with the grpc-go control plane",
	}}}
}

// start is a StartShard with every field set, so that a test sees each one
// cross the wire.
func (c *controlPlane) start(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	m := start(r)
	if c.padding > 0 {
		p := m.GetStartShard().GetProfile()
		p.Args = append(p.Args, "--padding="+strings.Repeat("x", c.padding))
	}
	return m
}

func start(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	return &llmgwv1.ControlMessage{Msg: &llmgwv1.ControlMessage_StartShard{StartShard: &llmgwv1.StartShard{
		ReplicaId:     "rep-go",
		ShardId:       r.GetNodeId() + "-s0",
		Rank:          0,
		Nnodes:        2,
		LeaderAddr:    "10.0.0.7",
		LeaderPort:    29500,
		GpuIndices:    []int32{0, 1, 2, 3},
		Hcas:          []string{"mlx5_0", "mlx5_1"},
		MgmtInterface: "eth0",
		HttpPort:      8000,
		Profile: &llmgwv1.EngineProfile{
			Name:            "llama-70b-tp4",
			Engine:          "vllm",
			GpuClass:        "h100-80g",
			Tp:              4,
			Pp:              2,
			GpusPerNode:     4,
			Nodes:           2,
			Args:            []string{"--max-model-len", "32768"},
			Env:             map[string]string{"VLLM_LOGGING_LEVEL": "INFO", "NCCL_IB_HCA": "mlx5"},
			ModelPath:       "/models/llama-3-70b",
			ServedModelName: "llama-3-70b",
			Adapters:        []*llmgwv1.LoraAdapter{{Name: "sql", Source: "/adapters/sql"}},
			KvEvents:        true,
		},
		StartupTimeoutMs: 600000,
		Pool:             "default",
		Fabric:           "ib-east",
		ProfileFp:        "fp-3f2a9c",
		ApiKey:           apiKey,
		CpuThreads:       0,
	}}}
}

func stop(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	return &llmgwv1.ControlMessage{Msg: &llmgwv1.ControlMessage_StopShard{StopShard: &llmgwv1.StopShard{
		ReplicaId:     "rep-go",
		ShardId:       r.GetNodeId() + "-s0",
		GracePeriodMs: 30000,
	}}}
}

func main() {
	os.Exit(run())
}

func run() int {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	scenario := flag.String("scenario", "serve", "graceful, status, serve or bad-then-good")
	padding := flag.Int("start-padding", 0, "bytes added to every StartShard (an engine argument)")
	badTimeout := flag.Int64("bad-timeout-ms", math.MaxInt64, "the bad StartShard's startup_timeout_ms (bad-then-good)")
	quiet := flag.Bool("quiet", false, "no RECV, SENT or END lines (a load run)")
	gzipOut := flag.Bool("gzip", false, "compress every message sent with gzip (gzip from agents is always accepted)")
	var tlsFlags peer.TLSFlags
	flag.StringVar(&tlsFlags.Cert, "tls-cert", "", "server certificate (PEM); TLS when given")
	flag.StringVar(&tlsFlags.Key, "tls-key", "", "server private key (PEM)")
	flag.StringVar(&tlsFlags.CA, "tls-ca", "", "CA (PEM) that client certificates must chain to; mutual TLS when given")
	flag.Parse()
	switch *scenario {
	case "graceful", "status", "serve", "bad-then-good":
	default:
		peer.Logf("controlplane: --scenario %q: expected graceful, status, serve or bad-then-good", *scenario)
		return 2
	}

	c := &controlPlane{scenario: *scenario, quiet: *quiet, padding: *padding, badTimeout: *badTimeout, quit: make(chan struct{}), stopped: make(chan struct{}),
		watch: newTrailerWatch()}
	opts := []grpc.ServerOption{grpc.StatsHandler(stopAfterStatus{c: c})}
	if *gzipOut {
		opts = append(opts, grpc.RPCCompressor(grpc.NewGZIPCompressor())) //nolint:staticcheck // the one server-wide way in this grpc-go
	}
	if tlsFlags.Enabled() {
		creds, err := tlsFlags.Server()
		if err != nil {
			peer.Logf("controlplane: %v", err)
			return 2
		}
		opts = append(opts, grpc.Creds(watchedCreds{TransportCredentials: creds, w: c.watch}))
	}
	c.srv = grpc.NewServer(opts...)
	llmgwv1.RegisterAgentServiceServer(c.srv, c)

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		peer.Logf("controlplane: listen %s: %v", *listen, err)
		return 1
	}
	peer.Line("LISTENING", strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))

	// stdin closing (the test is done, or died) and SIGTERM stop the server
	// gracefully, every open call ending with OK.
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		c.stop(true)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		c.stop(true)
	}()

	var serveOn net.Listener = lis
	if !tlsFlags.Enabled() {
		serveOn = watchedListener{Listener: lis, w: c.watch}
	}
	serveErr := c.srv.Serve(serveOn)
	if serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) {
		peer.Logf("controlplane: serve: %v", serveErr)
		return 1
	}
	// Serve returns as soon as the listener closes; the calls end later.
	select {
	case <-c.stopped:
	case <-time.After(30 * time.Second):
		peer.Logf("controlplane: calls still open 30 s after the stop began; stopping hard")
		c.srv.Stop()
		return 1
	}
	peer.Line("DONE")
	return 0
}
