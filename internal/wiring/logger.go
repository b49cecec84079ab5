package wiring

import (
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/providers"
)

// Logger builds the one root logger: console output on a terminal (or
// when asked), JSON lines otherwise, at the configured level, every line
// scrubbed of the secrets of scrub.
func Logger(c config.LogConfig, w io.Writer, scrub *providers.Scrubber) zerolog.Logger {
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		level = zerolog.InfoLevel // Validate already rejected bad levels
	}
	console := c.Format == config.FormatConsole
	if c.Format == config.FormatAuto {
		if f, ok := w.(*os.File); ok {
			console = isatty.IsTerminal(f.Fd())
		}
	}
	w = scrub.Writer(w)
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
