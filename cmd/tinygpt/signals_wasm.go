//go:build js || wasip1

package main

import (
	"os"
	"os/signal"
)

// stopSignals stop a training run after its step, with a checkpoint (see interruptible), and
// stopSignalNames say what each means to the user. A browser or WASI host delivers no others.
var (
	stopSignals     = []os.Signal{os.Interrupt}
	stopSignalNames = map[os.Signal]string{os.Interrupt: "interrupted"}
)

// notifyStop relays the stop signals to c (signal.Ignored is not implemented here).
func notifyStop(c chan<- os.Signal) { signal.Notify(c, stopSignals...) }
