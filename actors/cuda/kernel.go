package cuda

// sumBytesPTX is the checksum kernel: a grid-stride loop over n bytes at
// data, each thread summing its bytes into a register, then one atomic add
// of it to the u64 at out. PTX 7.0 for sm_50 and later; the driver
// compiles it for the GPU it finds. NUL-terminated, as cuModuleLoadData
// reads it.
const sumBytesPTX = `.version 7.0
.target sm_50
.address_size 64

.visible .entry sum_bytes(
	.param .u64 data,
	.param .u64 n,
	.param .u64 out
)
{
	.reg .pred %p<2>;
	.reg .b16 %rs<2>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<12>;

	ld.param.u64 %rd1, [data];
	ld.param.u64 %rd2, [n];
	ld.param.u64 %rd3, [out];
	cvta.to.global.u64 %rd4, %rd1;
	cvta.to.global.u64 %rd5, %rd3;
	mov.u32 %r1, %ntid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r4, %r2, %r1, %r3;
	cvt.u64.u32 %rd6, %r4;
	mov.u32 %r5, %nctaid.x;
	mul.wide.u32 %rd7, %r5, %r1;
	mov.u64 %rd8, 0;
$L_loop:
	setp.ge.u64 %p1, %rd6, %rd2;
	@%p1 bra $L_done;
	add.s64 %rd9, %rd4, %rd6;
	ld.global.u8 %rs1, [%rd9];
	cvt.u64.u16 %rd10, %rs1;
	add.s64 %rd8, %rd8, %rd10;
	add.s64 %rd6, %rd6, %rd7;
	bra.uni $L_loop;
$L_done:
	atom.global.add.u64 %rd11, [%rd5], %rd8;
	ret;
}
` + "\x00"

// kernelName is the entry point's name, NUL-terminated.
const kernelName = "sum_bytes\x00"

// Launch geometry: 256 threads a block, at most 1,024 blocks (a
// grid-stride loop covers the rest).
const (
	blockThreads = 256
	maxBlocks    = 1024
)

// HostChecksum is what the kernel computes, on the host: the sum of
// every byte, modulo 2^64.
func HostChecksum(b []byte) uint64 {
	var sum uint64
	for _, c := range b {
		sum += uint64(c)
	}
	return sum
}
