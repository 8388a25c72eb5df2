package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tinygpt/server"
)

func cmdServe(args []string, e *env) error {
	fs := newFlags(e, "serve", "[flags]", `
Starts the playground: a local web page to set up training runs, watch the loss fall live,
sample from models as they learn, look inside them, and keep, download and upload models.
It listens on 127.0.0.1 and a free port, prints the address and opens nothing unless --open.
Runs are stored in --dir. The API needs the access token: the printed address carries it
for the page (#token=, which the browser keeps to itself), and scripts send it in the
X-TinyGPT-Token header. It keeps the other users of this machine out. Ctrl-C saves a
checkpoint of the running job.`)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on (host:port; port 0 picks a free one)")
	dir := fs.String("dir", defaultDataDir(), "data directory where runs and models are kept")
	token := fs.String("token", "", "access token for the API (default: a random one, kept in DIR/token and printed)")
	open := fs.Bool("open", false, "open the playground in the default web browser")
	if _, err := parse(e, fs, args, 0); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", *addr, err)
	}
	public := !isLoopback(host)
	if public && *token != "" && len(*token) < minPublicToken {
		return fmt.Errorf("--token: listening beyond this machine needs a token of at least %d characters (leave --token out for a random one)", minPublicToken)
	}
	srv, err := server.New(server.Config{Dir: *dir, Token: *token, Public: public,
		Backends: backendList, Open: openNamedBackend, Check: checkNamedBackend})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	urls := playgroundURLs(host, ln.Addr().(*net.TCPAddr).Port, interfaceAddrs())
	for i := range urls {
		urls[i] += tokenFragment(srv.Token())
	}
	address := urls[0]
	fmt.Fprintf(e.stdout, "TinyGPT playground: %s\n", address)
	for _, u := range urls[1:] {
		fmt.Fprintf(e.stdout, "                 or %s\n", u)
	}
	fmt.Fprintf(e.stdout, "runs are kept in %s\n", *dir)
	if public {
		fmt.Fprintf(e.stdout, "listening beyond this machine: anyone with the address and token can use it\n")
	}
	fmt.Fprintf(e.stdout, "API token for scripts (header X-TinyGPT-Token): %s\n", srv.Token())
	fmt.Fprintf(e.stdout, "Ctrl-C stops the server, saving a checkpoint of a running job.\n")
	if *open {
		// The browser gets the address of a page in the data directory that redirects to the
		// playground, as Jupyter does: the address with the token, given to the opener, would
		// sit in the process list, where every user of the machine can read it.
		page, err := writeOpenPage(*dir, address)
		if err != nil {
			fmt.Fprintf(e.stderr, "could not open a browser (%v); open the address above yourself\n", err)
		} else {
			defer os.Remove(page)
			openBrowser(e.stderr, fileURL(page), address)
		}
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stop()
	fmt.Fprintln(e.stdout, "\nstopping: saving the running job, if any...")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	// The job is saved. Requests under way (a generation, a download) get a little while to
	// end; then their connections are closed: a client that stopped reading a download would
	// otherwise hold the process up for as long as it kept the connection open.
	gctx, gcancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer gcancel()
	if err := hs.Shutdown(gctx); errors.Is(err, context.DeadlineExceeded) {
		hs.Close()
		fmt.Fprintf(e.stdout, "closed the connections still open after %v\n", shutdownGrace)
	} else if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(e.stdout, "stopped")
	return nil
}

// shutdownGrace is how long serve's requests under way may go on once it has been asked to stop
// and has saved the running job.
const shutdownGrace = 10 * time.Second

// minPublicToken is the shortest token accepted when the server listens beyond loopback.
const minPublicToken = 16

// playgroundURLs returns the addresses to open the playground at: the host of --addr, or, when
// that is unspecified (all interfaces: "", 0.0.0.0 or ::), each address in addrs (this
// machine's), falling back to localhost when there is none.
func playgroundURLs(host string, port int, addrs []net.IP) []string {
	mk := func(h string) string { return "http://" + net.JoinHostPort(h, strconv.Itoa(port)) + "/" }
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return []string{mk(host)}
	}
	var urls []string
	for _, ip := range addrs {
		if ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsMulticast() {
			continue
		}
		if ip.To4() == nil && host != "" && host != "::" {
			continue // 0.0.0.0 listens on IPv4 only
		}
		urls = append(urls, mk(ip.String()))
	}
	if len(urls) == 0 {
		urls = []string{mk("localhost")}
	}
	return urls
}

// interfaceAddrs lists this machine's interface addresses (none where they cannot be read).
func interfaceAddrs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultDataDir is where runs are kept: $XDG_DATA_HOME/tinygpt, ~/.local/share/tinygpt, or the
// system's per-user configuration folder on macOS and Windows.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tinygpt")
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		if d, err := os.UserConfigDir(); err == nil {
			return filepath.Join(d, "tinygpt")
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "tinygpt")
	}
	return "tinygpt-data"
}

// tokenFragment is the end of the playground's address that carries the access token: a
// fragment, never sent to a server, nor in a Referer, escaped as the page reads it back
// (URLSearchParams), so that a --token with spaces, & or # survives.
func tokenFragment(token string) string { return "#token=" + url.QueryEscape(token) }

// writeOpenPage writes dir/open.html, readable by the user only, a page that sends the browser
// on to target, and returns its path.
func writeOpenPage(dir, target string) (string, error) {
	path := filepath.Join(dir, "open.html")
	os.Remove(path) // a new file gets the mode below
	t := html.EscapeString(target)
	page := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + t +
		`"><title>TinyGPT playground</title><p><a href="` + t + `">Open the TinyGPT playground</a></p>` + "\n"
	if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// fileURL returns the file: URL of path.
func fileURL(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/... on Windows
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// openBrowser asks the desktop to open target; failures (no opener, or an opener that finds no
// browser) are only reported, on w, naming the address to open instead.
func openBrowser(w io.Writer, target, url string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", target)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", target)
	default:
		cmd = exec.Command("xdg-open", target)
	}
	fail := func(err error) {
		fmt.Fprintf(w, "could not open a browser (%s: %v); open %s yourself\n", cmd.Args[0], err, url)
	}
	if err := cmd.Start(); err != nil {
		fail(err)
		return
	}
	go func() {
		if err := cmd.Wait(); err != nil {
			fail(err)
		}
	}()
}
