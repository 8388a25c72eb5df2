// Command tinygpt trains small GPT language models from scratch on your own text, samples from
// them, and reads and writes .tinygpt model files.
//
// Usage:
//
//	tinygpt train   [flags]            train a model (default: the small preset on the built-in corpus)
//	tinygpt sample  --model FILE       generate text from a model
//	tinygpt eval    --model FILE       exact validation loss of a model
//	tinygpt inspect FILE               print a model file's settings and history
//	tinygpt convert --to fp16 IN OUT   convert a model file (fp32, fp16, int4; --force replaces OUT)
//	tinygpt bench   [flags]            measure training speed per preset
//	tinygpt serve   [flags]            start the web playground
//	tinygpt version                    print the version
//
// Run "tinygpt help COMMAND" or "tinygpt COMMAND -h" for a command's flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, env *env) error
}

// env is what a command may touch: its streams. Tests run commands with buffers.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool // stdout is a terminal: progress may redraw one line
}

var commands []command

func init() {
	commands = []command{
		{"train", "train a model on a corpus (default: the small preset on the built-in corpus)", cmdTrain},
		{"sample", "generate text from a model file", cmdSample},
		{"eval", "exact loss of a model over a corpus's validation split", cmdEval},
		{"inspect", "print a model file's config, parameters, loss history and sample", cmdInspect},
		{"convert", "convert a model file to fp32, fp16 or int4", cmdConvert},
		{"bench", "measure training speed of presets on synthetic data", cmdBench},
		{"serve", "start the web playground: train, watch, sample and keep models in a browser", cmdServe},
		{"help", "show help for a command", cmdHelp},
	}
}

func main() {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, tty: isTerminal(os.Stdout)}
	os.Exit(run(os.Args[1:], e))
}

// run executes a command line and returns the exit status.
func run(args []string, e *env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(e.stdout)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(e.stdout, "tinygpt", version)
		return 0
	}
	for _, c := range commands {
		if c.name == name {
			err := c.run(args[1:], e)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			}
			var stopped interrupted
			if errors.As(err, &stopped) { // the run said so and saved its checkpoint
				return stopped.exitCode()
			}
			fmt.Fprintf(e.stderr, "tinygpt %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "tinygpt: unknown command %q\n\n", name)
	usage(e.stderr)
	return 2
}

const version = "0.1.0"

func usage(w io.Writer) {
	fmt.Fprintf(w, "tinygpt trains small GPT language models from scratch on your own text.\n\nUsage:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  tinygpt %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  tinygpt %-8s %s\n", "version", "print the version")
	fmt.Fprintf(w, "\nRun \"tinygpt help COMMAND\" or \"tinygpt COMMAND -h\" for a command's flags.\n")
}

func cmdHelp(args []string, e *env) error {
	if len(args) == 0 || args[0] == "help" {
		usage(e.stdout)
		return nil
	}
	if args[0] == "version" {
		fmt.Fprintln(e.stdout, "Usage: tinygpt version\n\nPrints the version of tinygpt.")
		return nil
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run([]string{"-h"}, &env{stdin: e.stdin, stdout: e.stdout, stderr: e.stdout})
		}
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// errUsage marks an error whose message flag parsing has already printed.
var errUsage = errors.New("usage")

// newFlags returns a flag set whose usage message shows the command's synopsis and defaults.
func newFlags(e *env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: tinygpt %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(about))
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, allowing flags after positional arguments ("inspect FILE --json"), and
// returns the positional arguments, of which there may be at most max. Help asked for (-h)
// goes to standard output; a flag's error and the usage after it, to standard error.
func parse(e *env, fs *flag.FlagSet, args []string, max int) ([]string, error) {
	usage := fs.Usage
	fs.Usage = func() {} // printed below, where it belongs
	defer func() { fs.Usage = usage }()
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				out := fs.Output()
				fs.SetOutput(e.stdout)
				usage()
				fs.SetOutput(out)
				return nil, err
			}
			usage()
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(rest) > max {
		fmt.Fprintf(fs.Output(), "tinygpt %s: unexpected argument %q\n", fs.Name(), rest[max])
		return nil, errUsage
	}
	return rest, nil
}

// setFlags returns the names of the flags the command line set.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// checkData refuses a --data flag given an empty value, which is most often a shell variable
// that was never set (--data "$CORPUS"): without it the command would go on with another text
// (the built-in corpus, or the one a model holds) and not say so. The message names that text,
// without.
func checkData(fs *flag.FlagSet, without string) error {
	if f := fs.Lookup("data"); f != nil && setFlags(fs)["data"] && f.Value.String() == "" {
		return fmt.Errorf("--data is empty (a shell variable that was not set?): name a file, a folder or - for standard input, or leave --data out for %s", without)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
