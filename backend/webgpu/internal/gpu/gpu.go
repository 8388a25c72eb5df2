// Package gpu is the small layer between the webgpu backend and the WebGPU binding
// (github.com/gogpu/wgpu): one device and its queue, storage buffers, compute kernels compiled
// from WGSL, a command stream that records dispatches and copies and submits them in pieces,
// and readback with a time limit, either blocking (Read) or asked for at a point of the stream
// and collected later (ReadLater, Await). Everything the backend needs from the binding goes
// through this package, so the binding can be swapped by rewriting only this file.
//
// Errors are sticky: the first failure (no adapter, out of memory, a lost device, a readback
// that does not finish in time) is kept in Device.Err, and every later call does nothing and
// returns it, so a caller that checks at its own pace never works on a broken device.
package gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/gogpu/gputypes"
	"github.com/gogpu/wgpu"
)

// spirvEnv names an environment variable for kernel experiments: when it names a folder, a
// kernel whose SPIR-V is found there (NAME.spv, as TINYGPT_DUMP_SPIRV writes it) is given to
// the driver as it is, in place of what naga makes of its WGSL, so that SPIR-V changed by other
// tools (spirv-opt, a hand edit) can be timed. Kernels it does not hold compile as usual. Vulkan
// only (hal_vulkan.go); on Metal it is refused (hal_darwin.go).
const spirvEnv = "TINYGPT_SPIRV_DIR"

// VariantFile returns the bytes of file in the folder that the environment variable env names,
// for kernel experiments (TINYGPT_WGSL_DIR, TINYGPT_SPIRV_DIR): nil when env is unset or the
// folder holds no such file. A folder that does not exist is an error, lest a mistyped name
// time the usual kernels in place of the variants.
func VariantFile(env, file string) ([]byte, error) {
	dir := os.Getenv(env)
	if dir == "" {
		return nil, nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", env, dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s=%s: not a folder", env, dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env, err)
	}
	return b, nil
}

// ErrNoAdapter is returned by Open when no GPU adapter is available.
var ErrNoAdapter = errors.New("no WebGPU adapter")

// ReadTimeout bounds how long a readback waits for the GPU before the device is declared
// lost. Work is submitted in steps of one training step at most, so a healthy device answers
// far sooner.
var ReadTimeout = 5 * time.Minute

// SpinTime is how long the host polls the GPU without sleeping while it waits, yielding its
// thread between polls; after that it sleeps PollSleep between polls. A sleep is far coarser
// than its argument (about a millisecond, measured on lavapipe and on an NVIDIA H100, where
// sleeping waits cost 1 ms each), while a training step waits a few times for work of tens
// of microseconds.
var (
	SpinTime  = 20 * time.Millisecond
	PollSleep = 50 * time.Microsecond
)

// paramSlot is the byte size of one dispatch's parameter block in the parameter arena: a
// multiple of every device's uniform offset alignment (at most 256 by the WebGPU spec).
const paramSlot = 256

// paramSlots is how many distinct parameter blocks the parameter arena holds (see
// Parameters); when they run out, the host waits for the GPU and starts again at 0.
const paramSlots = 4096

// FlushEvery is the number of dispatches after which the stream is submitted without waiting,
// so that the GPU starts on a long stream while the host goes on recording it (0: only when
// the host needs a result). After the host has waited for the GPU, which is then idle, the
// first submits come sooner: after FlushFirst dispatches, then twice as many each time up to
// FlushEvery. On an H100, before training steps were recorded while the one before ran, 64
// made tiny to medium 15-20% faster than submitting once per step, and larger presets 3-13%
// (128 and 256 did no better). Since then a step is recorded while the GPU is still busy with
// the one before, and every submit costs the GPU 14-16 µs more at the dispatch that begins it
// (GPU timestamps): 256 (large two submits a step instead of four) made large 2% faster and xl
// and huge 1%, the small presets unchanged (docs/performance.md, thirty-ninth session).
var FlushEvery, FlushFirst = 256, 8

// TransferChunk is the largest piece, in bytes (a multiple of 16), in which Write and Read move
// data, so that a large model's weights do not need staging buffers of their whole size.
var TransferChunk uint64 = 64 << 20

// Host data reaches buffers while commands are pending through the upload arena or upload
// pages (see stage; a batch of tokens and targets is a few tens of kilobytes), in pieces of up
// to uploadWindow bytes, what one upload kernel reads as a uniform binding. uploadArena is the
// arena's size; an upload page holds one window. Data of up to uploadArena/2 bytes is staged;
// larger data is written by the queue.
const (
	uploadArena  = 4 << 20
	uploadWindow = 64 << 10
)

// The kernels' needs, all within WebGPU's guaranteed limits: workgroups of up to 256
// invocations (256 along x) using up to 16 KB of workgroup memory.
const (
	MinInvocations      = 256
	MinWorkgroupStorage = 16384
)

// MaxParams is the number of 32-bit parameter words a kernel can receive.
const MaxParams = 32

// Info describes an adapter.
type Info struct {
	Name       string
	Vendor     string
	DeviceType string // "DiscreteGPU", "IntegratedGPU", "CPU", ...
	Backend    string // "Vulkan", "Metal", ...
	Software   bool   // a CPU implementation such as lavapipe or SwiftShader
}

// Limits are the device limits the backend plans around.
type Limits struct {
	MaxBufferSize        uint64 // bytes in one buffer
	MaxBindingSize       uint64 // bytes of one storage binding
	MaxWorkgroupStorage  uint32 // bytes of workgroup memory
	MaxInvocations       uint32 // invocations per workgroup
	MaxWorkgroupsPerDim  uint32 // workgroups in each dimension of one dispatch
	StorageOffsetAlign   uint32 // bytes; binding offsets must be multiples
	MaxStorageBuffersPer uint32 // storage buffers per shader stage
}

// Device is an open GPU device with one command stream.
type Device struct {
	inst    *wgpu.Instance
	adapter *wgpu.Adapter
	dev     *wgpu.Device
	queue   *wgpu.Queue
	info    Info
	limits  Limits
	err     error

	params     *wgpu.Buffer         // the parameter arena (see Parameters)
	slots      map[paramBlock]int32 // the slot holding each block written to the arena
	nparams    int                  // slots in use
	paramBase  int                  // the first slot not yet written to the arena
	paramBytes []byte               // the contents of slots paramBase..nparams-1
	pending    int                  // dispatches recorded since the last submit
	chunk      int                  // dispatches until the next submit without waiting

	enc  *wgpu.CommandEncoder
	pass *wgpu.ComputePassEncoder

	readback *wgpu.Buffer // staging buffer for Read, grown on demand

	reads    []*laterRead // ReadLater's reads in flight, in order
	unsent   int          // how many of the last reads are recorded but not yet submitted
	inRead   bool         // ReadLater is recording its own dispatch
	readPool []*laterRead // finished reads, whose buffers the next ones reuse

	upload  *Buffer // the upload arena (a uniform buffer): data written while commands are pending
	upBytes []byte  // its contents for the pending stream, from byte upBase of the arena
	upBase  int

	page      *Buffer           // the open upload page (see stage), nil when none is
	pageRange *wgpu.MappedRange // its mapping
	pageBytes []byte            // its mapped memory
	pageUsed  int               // bytes of it taken
	pagesDone []*Buffer         // pages closed since the last submit, released after it

	fillK, uploadK, copyK *Kernel // the layer's own kernels (see ownKernels)

	lastSubmit uint64 // index of the latest submit: the GPU may still be running it (see Ordering)

	graves []grave // freed, released once the GPU has run every submit that may use them

	groups map[groupKey]*wgpu.BindGroup
	bufs   map[uint64]*wgpu.Buffer // by Buffer.id
	nextID uint64
	dead   *deadList

	kernels []*Kernel

	stats    Stats
	syncEach bool
	stamps   *stampLog // with TimestampsEnv set (stamps.go)
}

// Stats counts what the device did, for finding where a step's time goes.
type Stats struct {
	Dispatches   int           // kernel runs recorded
	NewGroups    int           // bind groups created (the rest came from the cache)
	Submits      int           // command buffers submitted, the writes-only ones included
	WriteSubmits int           // submits carrying new parameter blocks or arena uploads (see below)
	Waits        int           // times the host waited for the GPU (ordering or readback)
	WaitTime     time.Duration // time spent in those waits
	SubmitTime   time.Duration // time in the binding's Submit and WriteBuffer calls
	RecordTime   time.Duration // time recording dispatches
	AwaitTime    time.Duration // time in Await (its submit and the reads' maps included)
	Reads        int           // readbacks
	Writes       int           // host writes

	// The binding waits for the GPU to finish all earlier work before a submit that carries
	// writes (see Flush), so in a training step only the first submit, and only when the step
	// starts on an idle GPU, should count in WriteSubmits (a step recorded while the GPU is
	// busy puts its data in upload pages: see stage).

	// PerKernel is, with SyncEach set, the time from recording each dispatch until the GPU
	// finished it, by kernel name (a submit and a wait of overhead included in each).
	PerKernel map[string]KernelTime
}

// KernelTime is the count and total time of one kernel's dispatches.
type KernelTime struct {
	N    int
	Time time.Duration
}

// SyncEach makes every dispatch its own submit, waited for, so that Stats.PerKernel says
// where the GPU's time goes. It is for profiling only: it makes everything far slower.
func (d *Device) SyncEach(on bool) { d.syncEach = on }

// Stats returns the counts since the last ResetStats.
func (d *Device) Stats() Stats { return d.stats }

// ResetStats zeroes the counts.
func (d *Device) ResetStats() {
	d.stats = Stats{}
	if d.stamps != nil {
		d.restartStamps()
	}
}

func init() {
	// The binding logs resource-lifetime warnings (buffers left to the garbage collector) at
	// Warn; a command-line tool shows its user only real errors.
	wgpu.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// quietWayland keeps Mesa's Vulkan layers from printing "error: XDG_RUNTIME_DIR is invalid or
// not set in the environment" when the GPU is opened outside a desktop session (over ssh, in a
// container, on a server): they look for a Wayland display, which TinyGPT never uses, and the
// Wayland library prints that line when the variable is unset. Where it is unset, quietWayland
// points it at a new empty private folder, where no display can be found, and returns the
// function that unsets it again and removes the folder.
func quietWayland() (restore func()) {
	if runtime.GOOS != "linux" || os.Getenv("XDG_RUNTIME_DIR") != "" {
		return func() {}
	}
	dir, err := os.MkdirTemp("", "tinygpt-xdg-*")
	if err != nil {
		return func() {}
	}
	os.Setenv("XDG_RUNTIME_DIR", dir)
	return func() {
		os.Unsetenv("XDG_RUNTIME_DIR")
		os.Remove(dir)
	}
}

// Open finds the highest-performance adapter and opens a device on it with the adapter's own
// limits (not WebGPU's defaults), so large tensors fit where the hardware allows.
func Open() (d *Device, err error) {
	defer func() {
		// The binding loads the system's Vulkan library through its own FFI; a missing or broken
		// driver must be an error, not a crash.
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("opening WebGPU: %v", r)
		}
	}()
	defer quietWayland()()
	inst, err := wgpu.CreateInstance(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAdapter, err)
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
		inst.Release()
		if why := noAdapterReason(); why != "" {
			return nil, fmt.Errorf("%w: %s", ErrNoAdapter, why)
		}
		return nil, fmt.Errorf("%w (no Vulkan, Metal or DX12 device found): %v", ErrNoAdapter, err)
	}
	al := ad.Limits()
	// The binding's Vulkan adapter reports WebGPU's default 256 MB as its largest buffer
	// whatever the hardware allows. A buffer may be as large as the largest storage binding
	// (4 GB on current NVIDIA GPUs); larger ones fail at allocation with a clear error.
	al.MaxBufferSize = max(al.MaxBufferSize, al.MaxStorageBufferBindingSize)
	dev, err := ad.RequestDevice(&wgpu.DeviceDescriptor{Label: "tinygpt", RequiredLimits: al})
	if err != nil {
		ad.Release()
		inst.Release()
		return nil, fmt.Errorf("opening a WebGPU device on %s: %w", ad.Info().Name, err)
	}
	ai := ad.Info()
	d = &Device{inst: inst, adapter: ad, dev: dev, queue: dev.Queue(), groups: map[groupKey]*wgpu.BindGroup{},
		bufs: map[uint64]*wgpu.Buffer{}, dead: &deadList{}}
	d.info = Info{Name: ai.Name, Vendor: ai.Vendor, DeviceType: fmt.Sprint(ai.DeviceType), Backend: fmt.Sprint(ai.Backend),
		Software: ai.DeviceType == gputypes.DeviceTypeCPU}
	l := dev.Limits()
	d.limits = Limits{MaxBufferSize: l.MaxBufferSize, MaxBindingSize: l.MaxStorageBufferBindingSize,
		MaxWorkgroupStorage: l.MaxComputeWorkgroupStorageSize, MaxInvocations: l.MaxComputeInvocationsPerWorkgroup,
		MaxWorkgroupsPerDim: l.MaxComputeWorkgroupsPerDimension, StorageOffsetAlign: l.MinStorageBufferOffsetAlignment,
		MaxStorageBuffersPer: l.MaxStorageBuffersPerShaderStage}
	if l.MaxComputeInvocationsPerWorkgroup < MinInvocations || l.MaxComputeWorkgroupStorageSize < MinWorkgroupStorage ||
		l.MaxStorageBuffersPerShaderStage < maxBinds || l.MaxComputeWorkgroupSizeX < MinInvocations {
		d.Close()
		return nil, fmt.Errorf("WebGPU device %s is too small for the kernels: %d invocations and %d bytes of workgroup memory per workgroup, %d storage buffers per kernel (need %d, %d and %d)",
			ai.Name, l.MaxComputeInvocationsPerWorkgroup, l.MaxComputeWorkgroupStorageSize, l.MaxStorageBuffersPerShaderStage,
			MinInvocations, MinWorkgroupStorage, maxBinds)
	}
	if l.MinUniformBufferOffsetAlignment > paramSlot || l.MinStorageBufferOffsetAlignment > 256 {
		d.Close()
		return nil, fmt.Errorf("WebGPU device %s needs buffer offsets aligned to %d/%d bytes; at most 256 is supported",
			ai.Name, l.MinUniformBufferOffsetAlignment, l.MinStorageBufferOffsetAlignment)
	}
	d.params, err = dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "params", Size: paramSlot * paramSlots,
		Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst})
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("allocating the kernel parameter buffer: %w", err)
	}
	d.slots = map[paramBlock]int32{}
	d.upload, err = d.newBuffer(uploadArena+uploadWindow, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("allocating the upload buffer: %w", err)
	}
	if err := d.ownKernels(); err != nil {
		d.Close()
		return nil, err
	}
	if os.Getenv(TimestampsEnv) != "" {
		if err := startStamps(d); err != nil {
			d.Close()
			return nil, fmt.Errorf("%w (%s is set): %v", ErrTimestamps, TimestampsEnv, err)
		}
	}
	return d, nil
}

// Info describes the device's adapter.
func (d *Device) Info() Info { return d.info }

// Limits returns the device's limits.
func (d *Device) Limits() Limits { return d.limits }

// Err returns the first error the device met, or nil.
func (d *Device) Err() error { return d.err }

func (d *Device) fail(err error) error {
	if d.err == nil {
		d.err = err
	}
	return d.err
}

// Close releases the device. Buffers and kernels made on it must not be used afterwards.
func (d *Device) Close() {
	if d.pass != nil {
		_ = d.pass.End()
		d.pass = nil
	}
	if d.enc != nil {
		d.enc.DiscardEncoding()
		d.enc = nil
	}
	for k, g := range d.groups {
		g.Release()
		delete(d.groups, k)
	}
	for id, b := range d.bufs {
		b.Release()
		delete(d.bufs, id)
	}
	for _, g := range d.graves {
		g.release()
	}
	d.graves = nil
	for _, k := range d.kernels {
		k.pipe.Release()
		k.plLayout.Release()
		k.layout.Release()
	}
	if d.readback != nil {
		d.readback.Release()
	}
	for _, r := range append(d.reads, d.readPool...) {
		r.stage.Release()
	}
	if d.params != nil {
		d.params.Release()
	}

	if d.dev != nil {
		d.dev.Release()
	}
	if d.adapter != nil {
		d.adapter.Release()
	}
	if d.inst != nil {
		d.inst.Release()
	}
	*d = Device{err: errors.New("gpu: device closed")}
}

// Buffer is a handle to a storage buffer on the device. The device keeps the buffer itself,
// keyed by the handle's id, so that its caches (bind groups) never keep a handle alive: a
// handle the program drops is noticed by the garbage collector, and its buffer and the bind
// groups that use it are released at the device's next call (see collect). Release frees a
// buffer at once.
type Buffer struct {
	id      uint64
	size    uint64
	cleanup runtime.Cleanup
}

// Size reports the buffer's size in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// NewBuffer allocates a zero-filled storage buffer of at least n bytes (rounded up to 16).
func (d *Device) NewBuffer(n uint64) (*Buffer, error) {
	if d.err != nil {
		return nil, d.err
	}
	d.collect()
	size := max(16, (n+15)/16*16)
	if size > d.limits.MaxBufferSize {
		return nil, fmt.Errorf("a buffer of %d bytes exceeds the device's limit of %d bytes (%s)", size, d.limits.MaxBufferSize, d.info.Name)
	}
	b, err := d.newBuffer(size, wgpu.BufferUsageStorage|wgpu.BufferUsageCopySrc|wgpu.BufferUsageCopyDst)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes on %s (out of GPU memory?): %w", size, d.info.Name, err)
	}
	// The binding reuses freed device memory without clearing it: clear it in the stream, with
	// a kernel (not a clear command, which the binding does not order before later kernels).
	if err := d.fill(b); err != nil {
		d.Release(b)
		return nil, err
	}
	return b, nil
}

// newBuffer allocates a device buffer with the given usage and registers it.
func (d *Device) newBuffer(size uint64, usage wgpu.BufferUsage) (*Buffer, error) {
	return d.register(d.dev.CreateBuffer(&wgpu.BufferDescriptor{Size: size, Usage: usage}))
}

// register registers a buffer the binding created.
func (d *Device) register(wb *wgpu.Buffer, err error) (*Buffer, error) {
	if err != nil {
		return nil, err
	}
	d.nextID++
	b := &Buffer{id: d.nextID, size: wb.Size()}
	d.bufs[b.id] = wb
	dead := d.dead
	b.cleanup = runtime.AddCleanup(b, func(id uint64) {
		dead.mu.Lock()
		dead.ids = append(dead.ids, id)
		dead.mu.Unlock()
	}, b.id)
	return b, nil
}

// deadList collects the ids of buffers whose handles the garbage collector found unreachable.
type deadList struct {
	mu  sync.Mutex
	ids []uint64
}

// collect releases the buffers of dropped or released handles. The binding refuses to submit
// commands that use a released buffer, so this runs only while nothing is recorded; submitted
// work keeps its buffers alive until it has run.
func (d *Device) collect() {
	if d.enc != nil {
		return
	}
	d.dead.mu.Lock()
	ids := d.dead.ids
	d.dead.ids = nil
	d.dead.mu.Unlock()
	for _, id := range ids {
		d.free(id)
	}
}

// grave is a buffer or bind group that free dropped, to be released once the GPU has run
// submit after (the latest when it was dropped), which may still use it. (The binding keeps
// what a dispatch binds alive until the GPU is done with it, but not the target of a queued
// write; graves make the rule one for everything.)
type grave struct {
	buf   *wgpu.Buffer
	group *wgpu.BindGroup
	after uint64
}

func (g grave) release() {
	if g.buf != nil {
		g.buf.Release()
	}
	if g.group != nil {
		g.group.Release()
	}
}

// free drops buffer id and the bind groups that use it from the device's tables. They are
// released once the GPU has run the latest submit (free runs only while nothing is recorded,
// so every command that uses them has been submitted; and no command buffer can see them
// released before it is submitted, which the binding rejects).
func (d *Device) free(id uint64) {
	wb := d.bufs[id]
	if wb == nil {
		return
	}
	for k, g := range d.groups {
		for _, e := range k.binds[:k.n] {
			if e.id == id {
				d.graves = append(d.graves, grave{group: g, after: d.lastSubmit})
				delete(d.groups, k)
				break
			}
		}
	}
	d.graves = append(d.graves, grave{buf: wb, after: d.lastSubmit})
	delete(d.bufs, id)
}

// bury releases what free dropped that the GPU is done with, without waiting for the rest.
func (d *Device) bury() {
	if len(d.graves) == 0 {
		return
	}
	done := d.queue.Poll()
	kept := d.graves[:0]
	for _, g := range d.graves {
		if g.after <= done {
			g.release()
		} else {
			kept = append(kept, g)
		}
	}
	clear(d.graves[len(kept):])
	d.graves = kept
}

// Release frees b after the work recorded so far. Using b afterwards is an error.
func (d *Device) Release(b *Buffer) {
	if b == nil || d.bufs == nil {
		return
	}
	b.cleanup.Stop()
	d.dead.mu.Lock()
	d.dead.ids = append(d.dead.ids, b.id)
	d.dead.mu.Unlock()
	d.collect()
}

// buffer returns the device buffer behind b, or nil if it was released.
func (d *Device) buffer(b *Buffer) *wgpu.Buffer {
	if b == nil {
		return nil
	}
	return d.bufs[b.id]
}

// Write copies data (a multiple of 4 bytes) into b at byte offset off, ordered after every
// command recorded so far. Data up to half the upload arena's size is staged (see stage) and
// copied by a kernel in the stream, so a write costs no submit of its own; larger data is
// written by the queue once the recorded work has run.
func (d *Device) Write(b *Buffer, off uint64, data []byte) error {
	if d.err != nil {
		return d.err
	}
	if d.buffer(b) == nil {
		return d.fail(errors.New("writing to a released buffer"))
	}
	d.stats.Writes++
	if d.unsent > 0 {
		// Submit the reads first, as Dispatch does, before the data makes the next submit
		// one that carries writes (see writesWait).
		if err := d.Flush(); err != nil {
			return err
		}
	}
	if len(data) <= uploadArena/2 {
		return d.stage(b, off, data)
	}
	for i := uint64(0); i < uint64(len(data)); i += TransferChunk {
		// In pieces, each submitted before the next is staged, so that the binding's staging
		// memory stays small.
		if err := d.writeDirect(b, off+i, data[i:min(i+TransferChunk, uint64(len(data)))]); err != nil {
			return err
		}
	}
	return nil
}

// ForceUpload, for tests, makes stage put host data in upload pages ("page") or in the upload
// arena ("arena") whether the GPU is busy or not ("": stage chooses).
var ForceUpload string

// stage records data's copy into b at off: pieces of one window, each copied by the upload
// kernel from the upload arena or from an upload page.
//
// The arena is written by the queue when the stream is submitted (which orders it before the
// stream: it is a uniform buffer); the kernel binds it in windows that start at multiples of
// uploadWindow, and no piece crosses into the next window, so that a training step's uploads,
// which land at other offsets each time, use at most uploadArena/uploadWindow bind groups. But
// the binding's queue writes wait until the GPU has finished all submitted work (see
// writesWait), so while the GPU is busy, pieces go to upload pages instead: uniform buffers
// created mapped, which the host writes straight into and unmaps before the submit that reads
// them (the host's writes before a submit are visible to the GPU), released once that submit
// has run. A training step recorded while the one before it runs (see ReadLater) thus goes out
// with its batch while that step still runs. Pages are not used when the GPU is idle: each
// is a new allocation and a new bind group, slower than a queued write that need not wait (on
// an H100, sampling one token at a time from huge was a fifth slower through pages).
func (d *Device) stage(b *Buffer, off uint64, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), uploadWindow)
		if d.nparams == paramSlots {
			// Dispatch would wait for the GPU and start the parameter arena (and the upload
			// arena) again with this piece in the stream: do it first.
			if err := d.restartParams(); err != nil {
				return err
			}
			continue
		}
		var src Binding
		var at int // the piece's byte offset in src
		if d.page != nil || len(d.upBytes) == 0 && (ForceUpload == "page" || ForceUpload == "" && !d.finished()) {
			at = (d.pageUsed + 15) / 16 * 16
			if d.page == nil || at+n > uploadWindow {
				if err := d.openPage(); err != nil {
					return err
				}
				at = 0
			}
			// Nothing may submit the stream between this copy and the dispatch below that
			// reads it, or the page would be gone: Write submitted pending reads before
			// staging, and the check above keeps Dispatch from starting the parameter arena
			// again.
			copy(d.pageBytes[at:], data[:n])
			d.pageUsed = at + n
			src = Binding{Buf: d.page, Off: 0, Size: uploadWindow}
		} else {
			at = (d.upBase + len(d.upBytes) + 15) / 16 * 16
			if at%uploadWindow+n > uploadWindow {
				at = (at/uploadWindow + 1) * uploadWindow
			}
			if at+n > uploadArena {
				if err := d.drain(); err != nil { // which starts the arena again
					return err
				}
				continue
			}
			d.upBytes = append(d.upBytes, make([]byte, at-d.upBase-len(d.upBytes))...)
			d.upBytes = append(d.upBytes, data[:n]...)
			wat := at / uploadWindow * uploadWindow
			src, at = Binding{Buf: d.upload, Off: uint64(wat), Size: uploadWindow}, at-wat
		}
		win := d.window(b, off, uint64(n))
		err := d.Dispatch(d.uploadK, []uint32{uint32((off - win.Off) / 4), uint32(n / 4), uint32(at / 4)},
			[]Binding{win, src}, groups1D(n/4), 1, 1)
		if err != nil {
			return err
		}
		data, off = data[n:], off+uint64(n)
	}
	return nil
}

// openPage closes the open upload page, if any, and opens a new one.
func (d *Device) openPage() error {
	d.closePage()
	p, err := d.register(d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "upload page", Size: uploadWindow,
		Usage: wgpu.BufferUsageUniform, MappedAtCreation: true}))
	if err != nil {
		return d.fail(fmt.Errorf("allocating an upload page: %w", err))
	}
	m, err := d.buffer(p).MappedRange(0, uploadWindow)
	if err != nil {
		d.Release(p)
		return d.fail(fmt.Errorf("mapping an upload page: %w", err))
	}
	d.page, d.pageRange, d.pageBytes, d.pageUsed = p, m, m.Bytes(), 0
	return nil
}

// closePage unmaps the open upload page, if any: its data is written, and it is released
// after the next submit has run.
func (d *Device) closePage() {
	if d.page == nil {
		return
	}
	d.pageRange.Release()
	if err := d.buffer(d.page).Unmap(); err != nil {
		d.fail(fmt.Errorf("unmapping an upload page: %w", err))
	}
	d.pagesDone = append(d.pagesDone, d.page)
	d.page, d.pageRange, d.pageBytes, d.pageUsed = nil, nil, nil, 0
}

// writeDirect writes data into b at off by the queue, after the recorded work has run, and
// waits for it: the binding orders a queued write to a storage buffer before nothing.
func (d *Device) writeDirect(b *Buffer, off uint64, data []byte) error {
	if err := d.Flush(); err != nil {
		return err
	}
	if err := d.beforeWrite(); err != nil {
		return err
	}
	wb := d.buffer(b)
	if wb == nil {
		return d.fail(errors.New("writing to a released buffer"))
	}
	if err := d.queue.WriteBuffer(wb, off, data); err != nil {
		return d.fail(fmt.Errorf("writing %d bytes to the GPU: %w", len(data), err))
	}
	return d.submitWrites()
}

// fill records the clearing of all of b, in windows of at most one binding.
func (d *Device) fill(b *Buffer) error {
	step := d.limits.MaxBindingSize / 256 * 256
	for off := uint64(0); off < b.size; off += step {
		n := min(step, b.size-off)
		err := d.Dispatch(d.fillK, []uint32{uint32(n / 4)}, []Binding{{Buf: b, Off: off, Size: n}}, groups1D(int(min(n/4, 1<<24))), 1, 1)
		if err != nil {
			return err
		}
	}
	return nil
}

// window returns a binding of b that covers n bytes from byte offset off and starts at an
// offset the device accepts for storage bindings.
func (d *Device) window(b *Buffer, off, n uint64) Binding {
	align := max(uint64(d.limits.StorageOffsetAlign), 4)
	start := off / align * align
	return Binding{Buf: b, Off: start, Size: off + n - start}
}

// groups1D is the number of 256-thread workgroups for n threads, within every device's
// per-dimension limit (kernels loop over the rest).
func groups1D(n int) int { return max(1, min((n+255)/256, 65535)) }

// The layer's own kernels: fill clears a buffer, upload copies a window of the upload arena
// (a uniform binding) into a buffer. Both stride over the grid, so any length fits one
// dispatch.
const fillWGSL = `
struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < p.n; i += nwg.x * 256u) {
        dst[i] = 0u;
    }
}
`

const uploadWGSL = `
struct Params { dst: u32, n: u32, src: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> src: array<vec4<u32>, 4096>;

@compute @workgroup_size(256)
fn upload(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < p.n; i += nwg.x * 256u) {
        let j = p.src + i;
        dst[p.dst + i] = src[j / 4u][j % 4u];
    }
}
`

const copyWGSL = `
struct Params { src: u32, n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < p.n; i += nwg.x * 256u) {
        dst[i] = src[p.src + i];
    }
}
`

// OwnKernels returns the WGSL of the layer's own kernels by entry point, for checks of the
// source (package webgpu compiles every kernel in the browser's WebGPU in a test).
func OwnKernels() map[string]string {
	return map[string]string{"fill": fillWGSL, "upload": uploadWGSL, "copy": copyWGSL}
}

// ownKernels compiles the layer's own kernels.
func (d *Device) ownKernels() error {
	var err error
	if d.fillK, err = d.newKernel("fill", fillWGSL, "fill", []bool{false}); err != nil {
		return err
	}
	if d.uploadK, err = d.newKernel("upload", uploadWGSL, "upload", []bool{false, true}); err != nil {
		return err
	}
	d.copyK, err = d.newKernel("copy", copyWGSL, "copy", []bool{false, false})
	return err
}

// Read copies len(dst) bytes of b from byte offset off into dst after all recorded work has
// run. off and len(dst) must be multiples of 4. Large reads go in pieces of TransferChunk.
func (d *Device) Read(dst []byte, b *Buffer, off uint64) error {
	for i := uint64(0); i < uint64(len(dst)); i += TransferChunk {
		if err := d.readPiece(dst[i:min(i+TransferChunk, uint64(len(dst)))], b, off+i); err != nil {
			return err
		}
	}
	if len(dst) == 0 {
		return d.Flush()
	}
	return nil
}

func (d *Device) readPiece(dst []byte, b *Buffer, off uint64) error {
	if d.err != nil {
		return d.err
	}
	n := uint64(len(dst))
	if n == 0 {
		return d.Flush()
	}
	size := (n + 15) / 16 * 16
	src := d.buffer(b)
	if src == nil {
		return d.fail(errors.New("reading a released buffer"))
	}
	if d.readback == nil || d.readback.Size() < size {
		if d.readback != nil {
			d.readback.Release()
		}
		rb, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "readback", Size: max(size, 1<<16),
			Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
		if err != nil {
			return d.fail(fmt.Errorf("allocating a %d-byte readback buffer: %w", size, err))
		}
		d.readback = rb
	}
	if err := d.encoder(); err != nil {
		return err
	}
	d.endPass()
	d.enc.CopyBufferToBuffer(src, off, d.readback, 0, (n+3)/4*4)
	// The copy ends the submit, so nothing later in the stream reads what it wrote. The host
	// waits for it as for every submit (spinning first, see SpinTime) before mapping.
	if err := d.Flush(); err != nil {
		return err
	}
	if err := d.beforeWrite(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadTimeout)
	defer cancel()
	t0 := time.Now()
	d.stats.Reads++
	d.stats.Waits++
	err := d.readback.Map(ctx, wgpu.MapModeRead, 0, size)
	d.stats.WaitTime += time.Since(t0)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return d.fail(fmt.Errorf("the GPU did not finish within %v; treating the device as lost", ReadTimeout))
		}
		return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
	}
	rng, err := d.readback.MappedRange(0, size)
	if err != nil {
		_ = d.readback.Unmap()
		return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
	}
	copy(dst, rng.Bytes())
	rng.Release()
	if err := d.readback.Unmap(); err != nil {
		return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
	}
	return nil
}

// laterRead is a read in flight (ReadLater): a kernel copies the range into snap, which no
// other read uses while this one is in flight, and the stream copies snap into stage, which the
// host maps. Nothing later in the stream touches either, so the read needs no ordering beyond
// the barrier after its kernel, and work recorded after it can change the source at once.
type laterRead struct {
	dst     []byte
	snap    *Buffer
	stage   *wgpu.Buffer // MapRead | CopyDst
	size    uint64       // bytes copied and mapped: len(dst) rounded up to 16
	pending *wgpu.MapPending
}

// ReadLater records the reading of len(dst) bytes of b from byte offset off (multiples of 4)
// as they are once the work recorded so far has run; Await fills dst. The read is submitted
// before any work recorded after it, so Await waits for the GPU to reach this point of the
// stream only: a training step can read its loss back while the GPU already runs the next
// step's passes. dst must not be used until Await returns.
func (d *Device) ReadLater(dst []byte, b *Buffer, off uint64) error {
	if d.err != nil {
		return d.err
	}
	n := uint64(len(dst))
	if n == 0 {
		return nil
	}
	if d.buffer(b) == nil {
		return d.fail(errors.New("reading a released buffer"))
	}
	size := (n + 15) / 16 * 16
	var r *laterRead
	for i, p := range d.readPool {
		if p.size >= size {
			r = p
			d.readPool = append(d.readPool[:i], d.readPool[i+1:]...)
			break
		}
	}
	if r == nil {
		size := max(size, 4096)
		snap, err := d.NewBuffer(size)
		if err != nil {
			return d.fail(fmt.Errorf("allocating a readback buffer: %w", err))
		}
		stage, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "readback", Size: size,
			Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
		if err != nil {
			d.Release(snap)
			return d.fail(fmt.Errorf("allocating a %d-byte readback buffer: %w", size, err))
		}
		r = &laterRead{snap: snap, stage: stage, size: size}
	}
	win := d.window(b, off, n)
	d.inRead = true
	err := d.Dispatch(d.copyK, []uint32{uint32((off - win.Off) / 4), uint32(n / 4)},
		[]Binding{win, {Buf: r.snap, Size: size}}, groups1D(int(n/4)), 1, 1)
	d.inRead = false
	if err == nil {
		err = d.encoder()
	}
	if err != nil {
		d.readPool = append(d.readPool, r)
		return err
	}
	d.endPass()
	d.enc.CopyBufferToBuffer(d.buffer(r.snap), 0, r.stage, 0, r.size)
	r.dst = dst
	d.reads = append(d.reads, r)
	d.unsent++
	d.stats.Reads++
	return nil
}

// Await submits everything recorded and waits until every ReadLater not yet awaited has
// filled its dst, but for the last keep of them, which stay in flight for a later Await. It
// does not wait for the work recorded after the reads it waits for, except that a submit
// carrying writes (new parameter blocks, uploads in the arena) first waits for the GPU to
// finish everything submitted before it (see writesWait). A training step recorded while the
// GPU is busy carries none (its data goes in upload pages, see stage), so it is submitted at
// once, with the reads of its own loss (kept) at its end, and runs after the reads awaited.
func (d *Device) Await(keep int) error {
	t0 := time.Now()
	defer func() { d.stats.AwaitTime += time.Since(t0) }()
	err := d.Flush()
	n := len(d.reads) - min(max(keep, 0), len(d.reads))
	i := 0 // reads[:i] are done with: awaited, or abandoned after an error (all of them then)
	for ; i < len(d.reads) && (i < n || err != nil); i++ {
		r := d.reads[i]
		if err == nil {
			err = d.awaitRead(r)
		}
		if r.pending != nil {
			// Failed or abandoned: cancel the map so that the buffer can be used again.
			r.pending.Release()
			r.pending = nil
			_ = r.stage.Unmap()
		}
		r.dst = nil
	}
	d.readPool = append(d.readPool, d.reads[:i]...)
	k := copy(d.reads, d.reads[i:])
	clear(d.reads[k:])
	d.reads = d.reads[:k]
	if err != nil {
		d.unsent = 0
	}
	if err == nil && d.finished() {
		d.idle()
	}
	return err
}

// PendingReads returns the number of ReadLater reads not yet awaited.
func (d *Device) PendingReads() int { return len(d.reads) }

// awaitRead waits for r's map and copies the bytes out.
func (d *Device) awaitRead(r *laterRead) error {
	err := d.waitUntil(func() bool {
		if ready, _ := r.pending.Status(); ready {
			return true
		}
		d.dev.Poll(wgpu.PollPoll) // resolves the maps of completed submits
		ready, _ := r.pending.Status()
		return ready
	})
	if err != nil {
		return err
	}
	_, err = r.pending.Status()
	r.pending = nil
	if err != nil {
		return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
	}
	rng, err := r.stage.MappedRange(0, r.size)
	if err != nil {
		_ = r.stage.Unmap()
		return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
	}
	copy(r.dst, rng.Bytes())
	rng.Release()
	if err := r.stage.Unmap(); err != nil {
		return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
	}
	return nil
}

// Kernel is a compiled compute pipeline whose bindings are a uniform parameter block at
// @binding(0) and storage buffers at @binding(1..Buffers) of @group(0).
type Kernel struct {
	Name    string
	Buffers int
	pipe    *wgpu.ComputePipeline
	layout  *wgpu.BindGroupLayout
	// plLayout must live as long as pipe: the binding's Vulkan path binds descriptor sets
	// with the pipeline's VkPipelineLayout, which releasing the layout destroys (lavapipe
	// happens to survive that; the NVIDIA driver computes garbage or crashes).
	plLayout *wgpu.PipelineLayout
}

// NewKernel compiles entry point entry of the WGSL source src. The shader's parameter block is
// a uniform at @group(0) @binding(0) and its nbuf storage buffers (all read_write) follow at
// bindings 1..nbuf.
func (d *Device) NewKernel(name, src, entry string, nbuf int) (*Kernel, error) {
	return d.newKernel(name, src, entry, make([]bool, nbuf))
}

// newKernel is NewKernel with each binding after the parameters a storage buffer, or a
// uniform buffer where uniform is true.
func (d *Device) newKernel(name, src, entry string, uniform []bool) (*Kernel, error) {
	if d.err != nil {
		return nil, d.err
	}
	nbuf := len(uniform)
	desc, err := shaderModule(name, src)
	if err != nil {
		return nil, fmt.Errorf("compiling kernel %s: %w", name, err)
	}
	mod, err := d.dev.CreateShaderModule(desc)
	if err != nil {
		return nil, fmt.Errorf("compiling kernel %s: %w", name, err)
	}
	defer mod.Release()
	entries := []wgpu.BindGroupLayoutEntry{{Binding: 0, Visibility: wgpu.ShaderStageCompute,
		Buffer: &gputypes.BufferBindingLayout{Type: gputypes.BufferBindingTypeUniform, MinBindingSize: paramSlot}}}
	for i := 1; i <= nbuf; i++ {
		t := gputypes.BufferBindingTypeStorage
		if uniform[i-1] {
			t = gputypes.BufferBindingTypeUniform
		}
		entries = append(entries, wgpu.BindGroupLayoutEntry{Binding: uint32(i), Visibility: wgpu.ShaderStageCompute,
			Buffer: &gputypes.BufferBindingLayout{Type: t}})
	}
	bgl, err := d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: name, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("kernel %s: bind group layout: %w", name, err)
	}
	pl, err := d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: name, BindGroupLayouts: []*wgpu.BindGroupLayout{bgl}})
	if err != nil {
		bgl.Release()
		return nil, fmt.Errorf("kernel %s: pipeline layout: %w", name, err)
	}
	pipe, err := d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{Label: name, Layout: pl, Module: mod,
		EntryPoint: entry})
	if err != nil {
		pl.Release()
		bgl.Release()
		return nil, fmt.Errorf("compiling kernel %s: %w", name, err)
	}
	k := &Kernel{Name: name, Buffers: nbuf, pipe: pipe, layout: bgl, plLayout: pl}
	d.kernels = append(d.kernels, k)
	return k, nil
}

// Binding is a byte range of a buffer bound to a kernel; Size 0 means to the end.
type Binding struct {
	Buf       *Buffer
	Off, Size uint64
}

const maxBinds = 8

// groupKey identifies a bind group: the kernel, its parameter slot and its buffer ranges. A
// training step records the same dispatches with the same parameters and buffers every time,
// so its bind groups are made in the first step and found in the cache afterwards, but for
// the few upload kernels that read an upload page, a new buffer each time (see stage). (The
// parameter slot is bound at a fixed offset because the binding's Vulkan path does not honour
// dynamic offsets.)
type groupKey struct {
	k     *Kernel
	slot  int32
	n     int
	binds [maxBinds]boundRange
}

// boundRange is a Binding by buffer id, so that the cache holds no Buffer handle.
type boundRange struct {
	id, off, size uint64
}

// Dispatch records one run of k over x×y×z workgroups with the given parameter words and
// storage bindings (in binding order 1..).
func (d *Device) Dispatch(k *Kernel, params []uint32, binds []Binding, x, y, z int) error {
	if d.err != nil {
		return d.err
	}
	if len(binds) != k.Buffers || len(binds) > maxBinds || len(params) > MaxParams {
		return d.fail(fmt.Errorf("kernel %s: %d bindings and %d parameters, want %d and at most %d", k.Name, len(binds), len(params), k.Buffers, MaxParams))
	}
	if x == 0 || y == 0 || z == 0 {
		return nil
	}
	if d.unsent > 0 && !d.inRead {
		// Submit the reads first, so that they do not wait for this work (see ReadLater).
		if err := d.Flush(); err != nil {
			return err
		}
	}
	d.stats.Dispatches++
	lim := int(d.limits.MaxWorkgroupsPerDim)
	if x > lim || y > lim || z > lim {
		return d.fail(fmt.Errorf("kernel %s: %d×%d×%d workgroups exceed the device's %d per dimension", k.Name, x, y, z, lim))
	}
	d.collect()
	t0 := time.Now()
	defer func() { d.stats.RecordTime += time.Since(t0) }()
	slot, err := d.paramSlot(params)
	if err != nil {
		return err
	}
	key := groupKey{k: k, slot: slot, n: len(binds)}
	var wbs [maxBinds]*wgpu.Buffer
	for i, b := range binds {
		if wbs[i] = d.buffer(b.Buf); wbs[i] == nil {
			return d.fail(fmt.Errorf("kernel %s: binding %d uses a released buffer", k.Name, i+1))
		}
		if b.Size == 0 {
			b.Size = b.Buf.size - b.Off
		}
		if b.Size > d.limits.MaxBindingSize {
			return d.fail(fmt.Errorf("kernel %s: a binding of %d bytes exceeds the device's limit of %d", k.Name, b.Size, d.limits.MaxBindingSize))
		}
		key.binds[i] = boundRange{b.Buf.id, b.Off, b.Size}
	}
	g := d.groups[key]
	if g == nil {
		entries := make([]wgpu.BindGroupEntry, 0, len(binds)+1)
		entries = append(entries, wgpu.BindGroupEntry{Binding: 0, Buffer: d.params, Offset: uint64(slot) * paramSlot, Size: paramSlot})
		for i, b := range key.binds[:key.n] {
			entries = append(entries, wgpu.BindGroupEntry{Binding: uint32(i + 1), Buffer: wbs[i], Offset: b.off, Size: b.size})
		}
		var err error
		g, err = d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Label: k.Name, Layout: k.layout, Entries: entries})
		if err != nil {
			return d.fail(fmt.Errorf("kernel %s: bind group: %w", k.Name, err))
		}
		d.groups[key] = g
		d.stats.NewGroups++
	}
	if err := d.encoder(); err != nil {
		return err
	}
	if d.pass == nil {
		p, err := d.enc.BeginComputePass(nil)
		if err != nil {
			return d.fail(fmt.Errorf("beginning a compute pass: %w", err))
		}
		d.pass = p
	}
	if d.stamps != nil {
		d.stamps.dispatch(k.Name, d.pending == 0)
	}
	d.pending++
	d.pass.SetPipeline(k.pipe)
	d.pass.SetBindGroup(0, g, nil)
	d.pass.Dispatch(uint32(x), uint32(y), uint32(z))
	if FlushEvery > 0 && d.pending >= min(max(d.chunk, FlushFirst), FlushEvery) && !d.syncEach && !d.writesWait() {
		d.chunk = min(2*max(d.chunk, FlushFirst), FlushEvery)
		return d.Flush()
	}
	if d.syncEach {
		t := time.Now()
		if err := d.Flush(); err != nil {
			return err
		}
		if err := d.beforeWrite(); err != nil {
			return err
		}
		if d.stats.PerKernel == nil {
			d.stats.PerKernel = map[string]KernelTime{}
		}
		kt := d.stats.PerKernel[k.Name]
		kt.N++
		kt.Time += time.Since(t)
		d.stats.PerKernel[k.Name] = kt
	}
	return nil
}

// Parameters. A dispatch's parameter words are a block in a slot of the parameter arena, a
// uniform buffer. A training step records the same dispatches with the same parameters every
// step, so slots are found by content: a block seen before is bound from the slot it went to,
// and the dispatch's bind group (which names the slot) comes from the cache too. A new block
// takes the next free slot, written by the queue when the stream is next submitted (the
// binding orders a queued write to a uniform buffer before the stream submitted with it).
// A slot's contents never change while the arena is in use, so work in flight never sees a
// slot rewritten; when the arena is full, the host waits for the GPU and starts it again,
// empty (a run whose parameters change every step, such as a learning-rate schedule's or
// dropout's seeds, does so every few hundred steps).

// paramBlock is the content of a parameter slot that kernels read.
type paramBlock [MaxParams]uint32

// paramSlot returns the slot holding params, writing them to a new one if none does.
func (d *Device) paramSlot(params []uint32) (int32, error) {
	var blk paramBlock
	copy(blk[:], params)
	if slot, ok := d.slots[blk]; ok {
		return slot, nil
	}
	if d.nparams == paramSlots {
		if err := d.restartParams(); err != nil {
			return 0, err
		}
	}
	slot := int32(d.nparams)
	d.nparams++
	d.slots[blk] = slot
	var b [paramSlot]byte
	for i, v := range blk {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	d.paramBytes = append(d.paramBytes, b[:]...)
	return slot, nil
}

// restartParams waits for the GPU and empties the parameter arena.
func (d *Device) restartParams() error {
	if err := d.drain(); err != nil {
		return err
	}
	// Bind groups name slots: drop them with the blocks, so that neither outgrows one arena's
	// worth. The GPU is idle, so they can go at once.
	clear(d.slots)
	for key, g := range d.groups {
		g.Release()
		delete(d.groups, key)
	}
	d.nparams, d.paramBase = 0, 0
	return nil
}

// Ordering. The binding (gogpu v0.31.5) puts a barrier after every dispatch (so kernels see
// each other's writes) and, for queued writes (queue.WriteBuffer) to uniform buffers, one
// between them and the stream they are submitted with. It puts none after a copy or a clear
// inside a command buffer, none after a queued write to a storage buffer, and it rewrites
// nothing in between submits on its own. (Real GPUs overlap what is not ordered: an NVIDIA H100
// computed on stale data; lavapipe runs everything in order.) So the stream holds dispatches
// only, apart from copies into readback buffers that nothing later in the stream touches (Read
// and ReadLater): new buffers are cleared and host data is copied in by kernels; host data and
// kernel parameters go through uniform buffers written by the queue into parts that no
// unfinished submit reads (the upload arena starts over only when the GPU is idle, a parameter
// slot is never rewritten while the arena is in use), or through upload pages, uniform buffers
// the host wrote before the submit that reads them (see stage); and the few writes too large
// for the upload arena are queued writes to the buffer itself, submitted on their own and
// waited for.
// Across submits, the barrier after each dispatch orders it before everything submitted later.

// submitWrites submits the binding's queued writes (queue.WriteBuffer) on their own and waits
// for them: the binding otherwise runs them in the same submit as the commands that follow,
// with no barrier between, so a real GPU may run those commands on the old contents.
func (d *Device) submitWrites() error {
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return d.fail(fmt.Errorf("creating a command encoder: %w", err))
	}
	cb, err := enc.Finish()
	if err != nil {
		return d.fail(fmt.Errorf("recording GPU commands: %w", err))
	}
	if err := d.submit(cb); err != nil {
		return err
	}
	return d.beforeWrite()
}

// submit submits cb (with the binding's queued writes ahead of it) and notes its index.
func (d *Device) submit(cb *wgpu.CommandBuffer) error {
	t0 := time.Now()
	idx, err := d.queue.Submit(cb)
	d.stats.SubmitTime += time.Since(t0)
	d.stats.Submits++
	if err != nil {
		if errors.Is(err, wgpu.ErrDeviceLost) {
			return d.fail(fmt.Errorf("the GPU device was lost: %w", err))
		}
		return d.fail(fmt.Errorf("submitting GPU work: %w", err))
	}
	d.lastSubmit = idx
	return nil
}

// beforeWrite waits until every submit has completed, before memory the GPU may read is
// rewritten.
func (d *Device) beforeWrite() error {
	if err := d.waitUntil(d.finished); err != nil {
		return err
	}
	d.idle()
	return nil
}

// waitUntil polls done until it reports true: spinning (yielding the thread) for SpinTime,
// then sleeping PollSleep between polls, and declaring the device lost after ReadTimeout. A
// wait that was needed is counted in the stats.
func (d *Device) waitUntil(done func() bool) error {
	if done() {
		return nil
	}
	t0 := time.Now()
	d.stats.Waits++
	defer func() { d.stats.WaitTime += time.Since(t0) }()
	deadline, spin := t0.Add(ReadTimeout), t0.Add(SpinTime)
	for !done() {
		now := time.Now()
		if now.After(deadline) {
			return d.fail(fmt.Errorf("the GPU did not finish within %v; treating the device as lost", ReadTimeout))
		}
		if now.Before(spin) {
			runtime.Gosched()
		} else {
			time.Sleep(PollSleep)
		}
	}
	return nil
}

// idle notes that the GPU has finished every submit: what free dropped can go, and with
// nothing recorded since, the upload arena starts again at its beginning.
func (d *Device) idle() {
	d.chunk = FlushFirst
	d.bury()
	if d.enc == nil && len(d.upBytes) == 0 {
		d.upBase = 0
	}
}

// drain submits the stream and waits for the GPU, which frees the whole parameter and upload
// arenas.
func (d *Device) drain() error {
	if err := d.Flush(); err != nil {
		return err
	}
	return d.beforeWrite()
}

func (d *Device) encoder() error {
	if d.err != nil {
		return d.err
	}
	if d.enc != nil {
		return nil
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return d.fail(fmt.Errorf("creating a command encoder: %w", err))
	}
	d.enc = enc
	return nil
}

func (d *Device) endPass() {
	if d.pass != nil {
		if err := d.pass.End(); err != nil {
			d.fail(fmt.Errorf("ending a compute pass: %w", err))
		}
		d.pass = nil
	}
}

// writesWait reports whether the next submit carries writes (new parameter blocks or arena
// uploads) while the GPU is still running earlier submits. The binding's queue writes wait
// until the GPU has finished everything submitted (docs/performance.md, thirty-third session),
// so such a submit cannot start before the GPU is idle: Dispatch then goes on recording
// instead of submitting, and Flush waits for the GPU first. (A training step recorded while
// the one before it runs puts its data in upload pages instead, and goes out at once: see
// stage.)
func (d *Device) writesWait() bool {
	return d.carriesWrites() && !d.finished()
}

// carriesWrites reports whether the next submit carries writes: new parameter blocks or uploads
// in the arena (upload pages need none: see stage).
func (d *Device) carriesWrites() bool { return len(d.paramBytes) > 0 || len(d.upBytes) > 0 }

// finished reports whether the GPU has finished every submit.
func (d *Device) finished() bool { return d.queue.Poll() >= d.lastSubmit }

// Flush submits everything recorded so far as one command buffer, after the parts of the
// parameter and upload arenas it reads (see submitWrites) and with the upload pages it reads
// unmapped. It does not wait: earlier submits, which the GPU may still be running, read other
// parts of the arenas and other pages.
func (d *Device) Flush() error {
	if d.err != nil {
		return d.err
	}
	if d.enc == nil {
		return nil
	}
	d.endPass()
	if d.writesWait() {
		// The binding's queue write would wait for the GPU itself, and notice late that it
		// has finished (docs/performance.md, thirty-fourth session); our wait spins.
		if err := d.waitUntil(d.finished); err != nil {
			return err
		}
	}
	writes := d.carriesWrites()
	if d.stamps != nil {
		d.stamps.flush(d.pending, writes)
	}
	// Both arenas are uniform buffers: the binding submits queued writes to them ahead of the
	// stream in the same submit, with a barrier that makes them visible to uniform reads. (The
	// binding's WriteBuffer first waits until the GPU has finished everything submitted: see
	// writesWait.)
	if writes {
		d.stats.WriteSubmits++
	}
	if len(d.paramBytes) > 0 {
		if err := d.queue.WriteBuffer(d.params, uint64(d.paramBase*paramSlot), d.paramBytes); err != nil {
			return d.fail(fmt.Errorf("writing kernel parameters: %w", err))
		}
	}
	if len(d.upBytes) > 0 {
		if err := d.queue.WriteBuffer(d.buffer(d.upload), uint64(d.upBase), d.upBytes); err != nil {
			return d.fail(fmt.Errorf("writing uploads: %w", err))
		}
		d.upBase += len(d.upBytes)
		d.upBytes = d.upBytes[:0]
	}
	if d.closePage(); d.err != nil {
		return d.err
	}
	cb, err := d.enc.Finish()
	d.enc = nil
	d.paramBytes = d.paramBytes[:0]
	d.paramBase = d.nparams
	d.pending = 0
	if err != nil {
		return d.fail(fmt.Errorf("recording GPU commands: %w", err))
	}
	if err := d.submit(cb); err != nil {
		return err
	}
	// A map waits for the latest submit at the time it is asked for: ask for the reads' maps
	// now, before anything later is submitted.
	for _, r := range d.reads[len(d.reads)-d.unsent:] {
		p, err := r.stage.MapAsync(wgpu.MapModeRead, 0, r.size)
		if err != nil {
			return d.fail(fmt.Errorf("reading back from the GPU: %w", err))
		}
		r.pending = p
	}
	d.unsent = 0
	for _, p := range d.pagesDone {
		d.Release(p)
	}
	clear(d.pagesDone)
	d.pagesDone = d.pagesDone[:0]
	d.bury()
	d.collect()
	return nil
}
