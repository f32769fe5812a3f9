// The Intel AMX instructions on a CPU without AMX, for tests: a SIGILL
// handler decodes the instruction that faulted, carries it out on tile
// registers kept per thread in memory, and resumes after it. The tile
// kernels' real instruction path (HardTiles in
// src/kernels/matmul_amx_x16_x86.cpp: the compiled LDTILECFG, TILELOADD,
// TILEZERO, TDPBSSD, TILESTORED and TILERELEASE with their encoded operands,
// strides and shapes) then runs on any x86-64 Linux machine, while the tile
// tests on real AMX cannot run.
//
// Semantics from the Intel SDM (vol. 2, "TILELOADD", "TDPBSSD/TDPBSUD/
// TDPBUSD/TDPBUUD", "LDTILECFG", ...; vol. 1 ch. 18): palette 1 (8 tiles of
// at most 16 rows x 64 bytes), rows and bytes past a tile's configured shape
// zeroed by every write, TILELOADD's stride = index register << scale, the
// configuration per thread. What the hardware faults on (#UD, #GP) the
// emulator reports on stderr and aborts: an instruction before LDTILECFG, a
// configuration the palette forbids, TDPB* operand shapes that do not chain
// (A.colsb / 4 != B.rows, C.colsb != B.colsb, C.rows != A.rows) or registers
// that alias. Written from the manual alone: it shares no code with the
// kernels' software tiles (SoftTiles), which model the same instructions.
//
// Not emulated (never used by skipkv): the BF16/FP16/complex dot products
// abort with their bytes; an AMX instruction with legacy prefixes before its
// VEX is not recognised and dies of SIGILL as without the emulator.
// A CPU with AMX runs the instructions itself: the emulator refuses to
// install there (tests then run on the real tiles, or skip with the reason).
#pragma once

#include <cstdint>
#include <string>

namespace skipkv::testing {

// Installs the handler (once per process; later calls are no-ops). False,
// with the reason in `why`, where it cannot run: not x86-64 Linux with GCC,
// or a CPU with AMX-TILE (part of the tile state would live in the hardware).
// An illegal instruction that is not AMX goes to the disposition SIGILL had
// before (by default the process dies as it would have).
bool InstallAmxTrapEmulator(std::string* why);

// AMX instructions emulated since start-up, over all threads.
int64_t AmxInstructionsEmulated();

}  // namespace skipkv::testing
