// Stand-in for the ACL runtime header (hicann/runtime), which CANN's CPU-debug
// headers include but whose declarations nothing in the kernel's include
// chain uses. For check_against_cann.sh only: never on a real build's path.
#pragma once
