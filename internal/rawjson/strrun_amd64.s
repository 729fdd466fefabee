//go:build !purego

#include "textflag.h"

// func stringRunAVX2(b []byte, i int) int
//
// From b[i], inside a string's body, returns the offset of the first byte
// the string scan must look at, passing over two-byte escapes of '"', '\\',
// '/', 'b', 'f', 'n', 'r' and 't' (see stringRun in strrun.go); or, when
// fewer than 32 bytes are left, where it stopped. 32 bytes a turn: a byte
// is flagged when it is '"' or '\\', or when 0x20 is greater than it as a
// signed byte (a control character, or a byte from 0x80 on).
TEXT ·stringRunAVX2(SB), NOSPLIT, $0-40
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), DX
	MOVQ i+24(FP), AX
	// VMOVQ, not MOVQ: a legacy-SSE instruction after VPBROADCASTB has
	// dirtied the upper lanes costs a state transition, on Intel cores
	// about 300 ns a call, which made the kernel slower than plainRun.
	MOVL $0x22, R8
	VMOVQ R8, X0
	VPBROADCASTB X0, Y1
	MOVL $0x5c, R8
	VMOVQ R8, X0
	VPBROADCASTB X0, Y2
	MOVL $0x20, R8
	VMOVQ R8, X0
	VPBROADCASTB X0, Y3

loop:
	LEAQ 64(AX), R9
	CMPQ R9, DX
	JA   one
	// Two words a turn while there is room: long runs of plain text.
	VMOVDQU (SI)(AX*1), Y4
	VMOVDQU 32(SI)(AX*1), Y7
	VPCMPEQB Y4, Y1, Y5
	VPCMPEQB Y4, Y2, Y6
	VPOR     Y5, Y6, Y5
	VPCMPGTB Y4, Y3, Y6
	VPOR     Y5, Y6, Y5
	VPCMPEQB Y7, Y1, Y8
	VPCMPEQB Y7, Y2, Y6
	VPOR     Y8, Y6, Y8
	VPCMPGTB Y7, Y3, Y6
	VPOR     Y8, Y6, Y8
	VPMOVMSKB Y5, R10
	TESTL    R10, R10
	JNZ      found
	VPMOVMSKB Y8, R10
	TESTL    R10, R10
	JNZ      found32
	ADDQ     $64, AX
	JMP      loop

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

found32:
	ADDQ $32, AX

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
	CMPL    R11, $0x22
	JEQ     skip
	CMPL    R11, $0x5c
	JEQ     skip
	CMPL    R11, $0x2f
	JEQ     skip
	CMPL    R11, $0x62
	JEQ     skip
	CMPL    R11, $0x66
	JEQ     skip
	CMPL    R11, $0x6e
	JEQ     skip
	CMPL    R11, $0x72
	JEQ     skip
	CMPL    R11, $0x74
	JEQ     skip
	JMP     done

skip:
	ADDQ $2, AX
	JMP  loop

done:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
