package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/data"
	"tinygpt/gpt"
	"tinygpt/train"
)

// fullGPU is a backend that fails as a GPU without the memory for a run does: the run cannot be
// set up on it, and it says why.
type fullGPU struct{ backend.Backend }

func (fullGPU) Err() error { return errors.New("out of GPU memory") }
func (fullGPU) Close()     {}

// A run that auto put on a GPU that cannot set it up goes to the CPU, saying so; one that named
// the GPU gets the GPU's error.
func TestAutoFallback(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	opts := train.DefaultOptions(p)
	for _, name := range []string{"auto", "webgpu"} {
		var be backend.Backend = fullGPU{cpu.New()}
		var tr *train.Trainer
		var stderr bytes.Buffer
		err := autoFallback(&env{stderr: &stderr}, name, &be, func() (err error) {
			tr, err = train.New(be, opts, data.Builtin())
			return err
		})
		switch name {
		case "auto":
			_, still := be.(fullGPU)
			if err != nil || tr == nil || tr.Model.Backend() != be || still ||
				stderr.String() != "backend auto: cpu (the GPU could not set the run up: out of GPU memory)\n" {
				t.Errorf("auto: %v, backend %s, said %q", err, be.Name(), stderr.String())
			}
		default:
			if err == nil || !strings.Contains(err.Error(), "out of GPU memory") || stderr.Len() != 0 {
				t.Errorf("%s: %v, said %q", name, err, stderr.String())
			}
		}
	}
}
