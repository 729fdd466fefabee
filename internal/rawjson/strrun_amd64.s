//go:build !purego

#include "textflag.h"

// func stringRunAVX2(b []byte, i int) int
//
// From b[i], inside a string's body, returns the offset of the first byte
// the string scan must look at, passing over two-byte escapes of '"', '\\',
// '/', 'b', 'f', 'n', 'r' and 't' (see stringRun in strrun.go); or, when
// fewer than 32 bytes are left, where it stopped. 64 bytes a turn while
// there is room, then 32: a byte is flagged when it is '"' or '\\', or when
// 0x20 is greater than it as a signed byte (a control character, or a byte
// from 0x80 on). A turn of 64 bytes passes over its escapes from its masks
// of bytes, without stopping at each: text with an escape every few dozen
// bytes (code, logs: "\n", "\t", "\"") is scanned 2-6 times as fast.
TEXT ·stringRunAVX2(SB), NOSPLIT, $0-40
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), DX
	MOVQ i+24(FP), AX
	// Broadcast from memory, not from a general register through VMOVQ:
	// fewer steps a call. (A legacy-SSE instruction here, after 256-bit
	// ones have dirtied the upper lanes, would cost a state transition, on
	// Intel cores about 300 ns a call: VEX encodings only.)
	VPBROADCASTB flagged<>+0(SB), Y1
	VPBROADCASTB flagged<>+1(SB), Y2
	VPBROADCASTB flagged<>+2(SB), Y3
	LEAQ    simple<>(SB), DI

loop:
	LEAQ 64(AX), R9
	CMPQ R9, DX
	JA   one
	// Two words a turn while there is room: long runs of plain text.
	VMOVDQU  (SI)(AX*1), Y4
	VMOVDQU  32(SI)(AX*1), Y7
	VPCMPEQB Y4, Y1, Y5
	VPCMPEQB Y4, Y2, Y6
	VPCMPGTB Y4, Y3, Y9
	VPCMPEQB Y7, Y1, Y8
	VPCMPEQB Y7, Y2, Y10
	VPCMPGTB Y7, Y3, Y11
	VPOR     Y5, Y9, Y5
	VPOR     Y8, Y11, Y8
	VPOR     Y5, Y6, Y0
	VPOR     Y8, Y10, Y9
	VPOR     Y0, Y9, Y0
	VPTEST   Y0, Y0
	JNZ      masks
	ADDQ     $64, AX
	JMP      loop

masks:
	// Quotes, control and non-ASCII bytes in R12, backslashes in R11, a
	// bit a byte.
	VPMOVMSKB Y5, R12
	VPMOVMSKB Y8, R10
	SHLQ      $32, R10
	ORQ       R10, R12
	VPMOVMSKB Y6, R11
	VPMOVMSKB Y10, R10
	SHLQ      $32, R10
	ORQ       R10, R11
	JNZ       escapes
	BSFQ      R12, R10
	ADDQ      R10, AX
	JMP       done

escapes:
	// The escaped bytes, in R14: with no two backslashes side by side,
	// the byte after each.
	MOVQ  R11, R14
	SHLQ  $1, R14
	TESTQ R11, R14
	JNZ   runs

escaped:
	// Stop at the backslash of the first escape that is not a two-byte
	// one (simple, at DI), looking at each escaped byte: most words hold
	// one or two.
	MOVQ  R14, R13
	TESTQ R13, R13
	JZ    plain
	LEAQ  (SI)(AX*1), R8

look:
	BSFQ    R13, R10
	MOVBLZX (R8)(R10*1), R9
	MOVBLZX (DI)(R9*1), R9
	TESTL   R9, R9
	JZ      other
	LEAQ    -1(R13), R9
	ANDQ    R9, R13
	JNZ     look

plain:
	// Or at an unescaped quote, control or non-ASCII byte (an escaped
	// control or non-ASCII byte has stopped the scan at its backslash).
	MOVQ R14, R10
	NOTQ R10
	ANDQ R12, R10
	JZ   pass
	BSFQ R10, R10
	ADDQ R10, AX
	JMP  done

other:
	MOVQ R14, R9
	NOTQ R9
	ANDQ R12, R9
	DECQ R10
	BTSQ R10, R9
	BSFQ R9, R9
	ADDQ R9, AX
	JMP  done

pass:
	// A backslash at the word's last byte that escapes the next word's
	// first: the next turn starts at it.
	ADDQ $64, AX
	BTQ  $63, R11
	JCC  loop
	BTQ  $63, R14
	JCS  loop
	DECQ AX
	JMP  loop

runs:
	// Runs of backslashes, each escaping every other byte after its start
	// (simdjson's find_escaped); b[AX] itself is never escaped.
	MOVQ R14, R9
	NOTQ R9
	ANDQ R11, R9
	MOVQ $0xAAAAAAAAAAAAAAAA, R10
	ANDQ R10, R9
	ADDQ R11, R9
	SHLQ $1, R9
	MOVQ $0x5555555555555555, R10
	XORQ R10, R9
	ANDQ R9, R14
	JMP  escaped

one:
	LEAQ 32(AX), R9
	CMPQ R9, DX
	JA   done
	VMOVDQU (SI)(AX*1), Y4
	VPCMPEQB Y4, Y1, Y5
	VPCMPEQB Y4, Y2, Y6
	VPOR     Y5, Y6, Y5
	VPCMPGTB Y4, Y3, Y6
	VPOR     Y5, Y6, Y5
	VPMOVMSKB Y5, R10
	TESTL    R10, R10
	JNZ      found
	ADDQ     $32, AX
	JMP      one

found:
	BSFL    R10, R10
	ADDQ    R10, AX
	MOVBLZX (SI)(AX*1), R11
	CMPL    R11, $0x5c
	JNE     done
	// A backslash: pass over a two-byte escape, stop at any other.
	LEAQ    1(AX), R9
	CMPQ    R9, DX
	JAE     done
	MOVBLZX (SI)(R9*1), R11
	MOVBLZX (DI)(R11*1), R11
	TESTL   R11, R11
	JNZ     skip1
	JMP     done

skip1:
	ADDQ $2, AX
	JMP  one

done:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET

// flagged: the bytes '"', '\\' and 0x20.
DATA flagged<>+0x00(SB)/8, $0x0000000000205c22
GLOBL flagged<>(SB), RODATA|NOPTR, $8

// simple: 1 for the bytes a two-byte escape the scan passes over holds
// after its backslash: '"' (0x22), '/' (0x2f), '\\' (0x5c), 'b', 'f',
// 'n', 'r', 't'.
DATA simple<>+0x20(SB)/8, $0x0000000000010000
DATA simple<>+0x28(SB)/8, $0x0100000000000000
DATA simple<>+0x58(SB)/8, $0x0000000100000000
DATA simple<>+0x60(SB)/8, $0x0001000000010000
DATA simple<>+0x68(SB)/8, $0x0001000000000000
DATA simple<>+0x70(SB)/8, $0x0000000100010000
GLOBL simple<>(SB), RODATA|NOPTR, $256
