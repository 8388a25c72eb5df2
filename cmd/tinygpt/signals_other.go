//go:build !js && !wasip1

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// stopSignals stop a training run after its step, with a checkpoint (see interruptible), and
// stopSignalNames say what each means to the user.
var (
	stopSignals     = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}
	stopSignalNames = map[os.Signal]string{
		os.Interrupt:    "interrupted",
		syscall.SIGTERM: "terminated",
		syscall.SIGHUP:  "the terminal closed",
		syscall.SIGPIPE: "the output's reader went away",
	}
)

// notifyStop relays the stop signals to c, but for those the process ignores: nohup's ignored
// hangup stays ignored, and the run goes on.
func notifyStop(c chan<- os.Signal) {
	for _, s := range stopSignals {
		if !signal.Ignored(s) {
			signal.Notify(c, s)
		}
	}
}
