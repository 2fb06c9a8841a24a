"""How element loops run on this machine: the path policy and the one interface element kernels use
(`loops`), the ports of the threaded path (`ports`, `parts`), loops in lanes (`lanes`) and the SIMD
width they follow (`simd`).  Physics kernels import `tigradsim.exec.loops` and never ask which path
they are on."""
