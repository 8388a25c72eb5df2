package cpu

import "os"

// noAsm forces the plain-Go kernels when the environment variable TINYGPT_NOASM is set to 1,
// for comparing the kernels against each other.
var noAsm = os.Getenv("TINYGPT_NOASM") == "1"
