// Command agent is an agent's end of the llmgw agent stream on grpc-go, for
// interop tests of llmgw-wire's Python control plane. Scenarios:
//
//	register       send a Register (whole cards and a MIG slice, NVLink
//	               fabric, running shards with and without compute), then
//	               read every ControlMessage until the call ends
//	bad-then-good  send a Register, wait for the Ack, then a Heartbeat that
//	               is valid protobuf for Go but that the Python domain cannot
//	               hold (sent_at_unix_ms in the year 10000), then a valid
//	               ShardStatus, half-close, and read until the call ends
//
// --cancel-after N cancels the call after N ControlMessages, without a
// half-close, and exits (a CANCELLED line first). Built with -tags nogzip
// (bin/agent-nogzip), the agent has no gzip encoding at all, as most grpc-go
// agents: it can neither send nor read gzip.
//
// Output, one event per line on stdout: SENT <protojson> for every
// AgentMessage sent; UNSENT <protojson> for one the ended call did not take;
// ENCODING <grpc-encoding of the response>; RECV <protojson> for every
// ControlMessage; STATUS <code> [<message>] when the call ends.
//
// The exit code is 0 when the call ran to its end (a STATUS line, whatever its
// code: the test judges it), 1 when it timed out (--timeout) or could not be
// set up, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	llmgwv1 "llmgwinterop/gen/llmgwv1"
	"llmgwinterop/peer"
)

// 10000-01-01T00:00:00Z in milliseconds: valid in int64, beyond what a
// Python datetime holds.
const year10000Ms = 253402300800000

type agent struct {
	nodeID     string
	extraGPUs  int
	ready      bool
	closeAfter int
	// cancelAfter cancels the call (no half-close) after this many
	// ControlMessages, as a killed agent's call ends.
	cancelAfter int
	cancel      context.CancelFunc
	badSentAt  int64

	stream   llmgwv1.AgentService_ConnectClient
	received int
	closed   bool
}

func main() {
	os.Exit(run())
}

func run() int {
	a := &agent{}
	target := flag.String("target", "", "control plane address, e.g. 127.0.0.1:50051")
	scenario := flag.String("scenario", "register", "register or bad-then-good")
	flag.StringVar(&a.nodeID, "node-id", "go-agent-1", "the node id to register as")
	useGzip := flag.Bool("gzip", false, "compress every message sent with gzip (grpc.UseCompressor)")
	timeout := flag.Duration("timeout", 60*time.Second, "deadline of the whole call")
	flag.IntVar(&a.extraGPUs, "extra-gpus", 0, "whole cards to add to the Register beyond the sample's")
	flag.BoolVar(&a.ready, "ready", false, "answer every StartShard with a ShardStatus READY")
	flag.IntVar(&a.closeAfter, "close-after", 0, "half-close after this many ControlMessages (0: never)")
	flag.IntVar(&a.cancelAfter, "cancel-after", 0, "cancel the call, without a half-close, after this many ControlMessages (0: never)")
	flag.Int64Var(&a.badSentAt, "bad-sent-at-ms", year10000Ms, "the bad Heartbeat's sent_at_unix_ms (bad-then-good)")
	var tlsFlags peer.TLSFlags
	flag.StringVar(&tlsFlags.Cert, "tls-cert", "", "client certificate (PEM), for mutual TLS")
	flag.StringVar(&tlsFlags.Key, "tls-key", "", "client private key (PEM)")
	flag.StringVar(&tlsFlags.CA, "tls-ca", "", "CA (PEM) the server's certificate must chain to; TLS when given")
	flag.StringVar(&tlsFlags.ServerName, "tls-server-name", "", "name to verify the server's certificate for (default: the target's host)")
	flag.Parse()
	if *target == "" {
		peer.Logf("agent: --target is required")
		return 2
	}
	if *scenario != "register" && *scenario != "bad-then-good" {
		peer.Logf("agent: --scenario %q: expected register or bad-then-good", *scenario)
		return 2
	}

	dial := []grpc.DialOption{grpc.WithStatsHandler(peer.EncodingLogger{})}
	if tlsFlags.Enabled() {
		creds, err := tlsFlags.Client()
		if err != nil {
			peer.Logf("agent: %v", err)
			return 2
		}
		dial = append(dial, grpc.WithTransportCredentials(creds))
	} else {
		dial = append(dial, grpc.WithInsecure())
	}
	conn, err := grpc.Dial(*target, dial...)
	if err != nil {
		peer.Logf("agent: dial %s: %v", *target, err)
		return 1
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	a.cancel = cancel
	var call []grpc.CallOption
	if *useGzip {
		if gzipName == "" {
			peer.Logf("agent: --gzip: built without the gzip encoding (-tags nogzip)")
			return 2
		}
		call = append(call, grpc.UseCompressor(gzipName))
	}
	a.stream, err = llmgwv1.NewAgentServiceClient(conn).Connect(ctx, call...)
	if err != nil {
		return a.end(ctx, err)
	}

	a.send(&llmgwv1.AgentMessage{Msg: &llmgwv1.AgentMessage_Register{Register: register(a.nodeID, a.extraGPUs)}})
	if *scenario == "bad-then-good" {
		for {
			m, err := a.recv()
			if err != nil {
				return a.end(ctx, err)
			}
			if m.GetAck() != nil {
				break
			}
		}
		a.send(&llmgwv1.AgentMessage{Msg: &llmgwv1.AgentMessage_Heartbeat{Heartbeat: &llmgwv1.Heartbeat{
			NodeId: a.nodeID, SentAtUnixMs: a.badSentAt,
		}}})
		a.send(&llmgwv1.AgentMessage{Msg: &llmgwv1.AgentMessage_ShardStatus{ShardStatus: &llmgwv1.ShardStatus{
			ReplicaId: "rep-a", ShardId: "rep-a-0", State: llmgwv1.ShardStatus_STATE_READY,
			Compute: &llmgwv1.Compute{Backend: "cuda", Devices: []string{"cuda:0", "cuda:1"}, LayersOffloaded: 80, LayersTotal: 80},
		}}})
		a.closeSend()
	}
	for {
		if _, err := a.recv(); err != nil {
			return a.end(ctx, err)
		}
	}
}

// recv reads one ControlMessage, and reacts as the flags ask.
func (a *agent) recv() (*llmgwv1.ControlMessage, error) {
	m, err := a.stream.Recv()
	if err != nil {
		return nil, err
	}
	peer.Line("RECV", peer.JSON(m))
	a.received++
	if s := m.GetStartShard(); s != nil && a.ready {
		a.send(&llmgwv1.AgentMessage{Msg: &llmgwv1.AgentMessage_ShardStatus{ShardStatus: &llmgwv1.ShardStatus{
			ReplicaId: s.GetReplicaId(), ShardId: s.GetShardId(), State: llmgwv1.ShardStatus_STATE_READY,
			Compute: &llmgwv1.Compute{Backend: "cuda", Devices: []string{"cuda:0"}, LayersOffloaded: 32, LayersTotal: 32},
		}}})
	}
	if a.closeAfter > 0 && a.received >= a.closeAfter {
		a.closeSend()
	}
	if a.cancelAfter > 0 && a.received >= a.cancelAfter {
		peer.Line("CANCELLED")
		a.cancel()
		// Give the RST_STREAM time to leave before the process exits.
		time.Sleep(200 * time.Millisecond)
		os.Exit(0)
	}
	return m, nil
}

// send sends one message; when the call has already ended, grpc-go's Send
// says io.EOF and the status comes from the next Recv.
func (a *agent) send(m *llmgwv1.AgentMessage) {
	if a.closed {
		peer.Line("UNSENT", peer.JSON(m))
		return
	}
	if err := a.stream.Send(m); err != nil {
		peer.Line("UNSENT", peer.JSON(m))
		return
	}
	peer.Line("SENT", peer.JSON(m))
}

func (a *agent) closeSend() {
	if !a.closed {
		a.closed = true
		_ = a.stream.CloseSend()
	}
}

// end prints how the call ended and gives the exit code.
func (a *agent) end(ctx context.Context, err error) int {
	st := status.Convert(err)
	if errors.Is(err, io.EOF) {
		st = status.New(codes.OK, "")
	}
	if st.Message() == "" {
		peer.Line("STATUS", peer.CodeName(st.Code()))
	} else {
		peer.Line("STATUS", peer.CodeName(st.Code()), peer.OneLine(st.Message()))
	}
	if ctx.Err() != nil {
		peer.Logf("agent: no end of the call within --timeout")
		return 1
	}
	return 0
}

// register is a registration with each presence case the mapping knows: a
// whole card on an NVLink fabric, a MIG slice without one, running shards
// with and without compute. extra adds whole cards, for large registrations.
func register(nodeID string, extra int) *llmgwv1.Register {
	gpus := []*llmgwv1.GPU{
		{
			Index: 0, Uuid: "GPU-4d5e6f70-0000-4000-8000-000000000000", Name: "NVIDIA GB200",
			MemoryTotalMb: 189471, MemoryUsedMb: 1024, ComputeCapability: "10.0", NumaNode: 0,
			PciBusId: "00000000:18:00.0", DriverVersion: "570.86.15", UtilizationPercent: 12,
			CudaVersion: "12.8", NvlinkPeers: []int32{1}, NicPaths: map[string]string{"mlx5_0": "PIX", "mlx5_1": "SYS"},
			FabricState: "Completed", FabricStatus: "Success",
			ClusterUuid: "c1a2b3c4-0000-4000-8000-000000000001", CliqueId: "7", FabricBandwidth: "Full",
			EccErrors: 0, TemperatureC: 41,
		},
		{
			Index: 1, Uuid: "MIG-9a8b7c6d-0000-4000-8000-000000000002", Name: "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
			MemoryTotalMb: 9984, MemoryUsedMb: 0, ComputeCapability: "9.0", NumaNode: -1,
			PciBusId: "00000000:3b:00.0", DriverVersion: "570.86.15", UtilizationPercent: 0,
			CudaVersion: "12.8", EccErrors: 2, TemperatureC: 38, Problems: []string{"ECC errors since boot"},
			Mig: &llmgwv1.MIGDevice{
				ParentIndex: 1, ParentUuid: "GPU-1b2c3d4e-0000-4000-8000-000000000003",
				ParentMemoryTotalMb: 81559, Device: 0, Profile: "1g.10gb", GpuInstance: 9, ComputeInstance: 0,
			},
		},
	}
	for i := 0; i < extra; i++ {
		n := int32(len(gpus))
		gpus = append(gpus, &llmgwv1.GPU{
			Index: n, Uuid: fmt.Sprintf("GPU-00000000-0000-4000-8000-%012d", n), Name: "NVIDIA H100 80GB HBM3",
			MemoryTotalMb: 81559, ComputeCapability: "9.0", NumaNode: n % 2,
			PciBusId: fmt.Sprintf("00000000:%02x:00.0", n%256), DriverVersion: "570.86.15", CudaVersion: "12.8",
			TemperatureC: 35,
		})
	}
	return &llmgwv1.Register{
		NodeId: nodeID, Hostname: nodeID + ".example", MgmtAddr: "10.0.0.7",
		Labels: map[string]string{"zone": "a", "rack": "r12"}, AgentVersion: "go-interop/1",
		Features: []string{"mig", "compute"}, EngineVersions: map[string]string{"vllm": "0.9.1", "llamacpp": "b5000"},
		EnginesProbed: true, MemoryTotalMb: 2063808, CpuCount: 144,
		Host: &llmgwv1.Host{
			OsId: "ubuntu", OsVersion: "24.04", OsCodename: "noble", Arch: "aarch64",
			CpuFlags: []string{"sve", "sve2"}, NvidiaDriver: "570.86.15",
		},
		Weights: []*llmgwv1.LocalWeights{{Path: "/models/llama-3-70b", SizeBytes: 141107927040, Shared: true}},
		Storage: []*llmgwv1.Storage{{Path: "/models", FreeBytes: 3298534883328, TotalBytes: 7696581394432, Shared: true}},
		Gpus:    gpus,
		Imex:    &llmgwv1.IMEX{State: "UP", Channels: 2},
		Fabrics: []*llmgwv1.FabricAttachment{{Fabric: "ib-east", Hcas: []string{"mlx5_0", "mlx5_1"}, RateGbps: 400}},
		RunningShards: []*llmgwv1.RunningShard{
			{
				ReplicaId: "rep-a", ShardId: "rep-a-0", Rank: 0, GpuIndices: []int32{0}, Hcas: []string{"mlx5_0"},
				HttpPort: 8000, State: llmgwv1.ShardStatus_STATE_READY, Model: "llama-3-70b", Profile: "llama-70b-tp4",
				Pool: "default", Fabric: "ib-east", ProfileFp: "fp-3f2a9c", LeaderAddr: "10.0.0.7",
				Compute: &llmgwv1.Compute{Backend: "cuda", Devices: []string{"cuda:0"}, LayersOffloaded: 80, LayersTotal: 80},
			},
			{
				ReplicaId: "rep-b", ShardId: "rep-b-1", Rank: 1, GpuIndices: []int32{1}, HttpPort: 8001,
				State: llmgwv1.ShardStatus_STATE_LOADING, Model: "qwen-7b", Profile: "qwen-7b-mig", Pool: "default",
				ProfileFp: "fp-77aa01",
			},
		},
	}
}
