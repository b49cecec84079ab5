package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// DefaultSearchK is how many chunks a manual retrieval asks for.
const DefaultSearchK = 8

// ChunksScreen is the chunk browser. Its first tab is manual retrieval
// (a query, the chunks it finds with their scores, a chunk's full text);
// its second the context debug view of a turn: which chunks retrieval
// offered, which were packed, each section's tokens, and whether the
// rebuilt context is what was sent; its third browses the chunks each
// turn of the branch was indexed into, turn by turn.
type ChunksScreen struct {
	// K is how many chunks a search asks for.
	K int

	tab chunkTab

	input   textinput.Model
	typing  bool // the query input has the focus
	query   string
	hits    []api.Hit
	rows    rowCursor
	reading bool // the selected hit's text is shown
	text    scrollPage
	gen     int // the search in flight; results of older ones are dropped
	note    string

	debugSeq  uint64 // the turn shown; 0: the branch's last
	debug     *api.ContextDebug
	debugNote string
	debugPage scrollPage
	debugGen  int

	browse chunkBrowser
}

// chunkTab is a tab of the chunk screen.
type chunkTab int

const (
	tabSearch chunkTab = iota
	tabDebug
	tabBrowse
	chunkTabs // how many there are
)

// chunkTabNames are the tabs' titles.
var chunkTabNames = [chunkTabs]string{"Search", "Context debug", "Browse"}

// NewChunksScreen returns the chunk browser.
func NewChunksScreen() Screen { return newChunksScreen() }

func newChunksScreen() *ChunksScreen {
	in := textinput.New()
	in.Prompt = "query> "
	in.Placeholder = "words to search the branch's memory for"
	st := in.Styles()
	st.Cursor.Blink = false
	in.SetStyles(st)
	return &ChunksScreen{K: DefaultSearchK, input: in, text: newScrollPage(), debugPage: newScrollPage(),
		browse: chunkBrowser{text: newScrollPage()},
		note:   "Enter searches the branch's memory; tab shows what the last turn was sent."}
}

// chunkHitsMsg is the result of a search.
type chunkHitsMsg struct {
	gen   int
	query string
	hits  []api.Hit
	err   error
}

// chunkDebugMsg is the result of loading a turn's context debug view.
type chunkDebugMsg struct {
	gen   int
	seq   uint64
	debug api.ContextDebug
	err   error
}

// Name implements Screen.
func (c *ChunksScreen) Name() string { return "Chunks" }

// Modal reports whether the screen takes Esc itself: while the query is
// being typed (Esc leaves the input) or a chunk's text is shown (Esc goes
// back to the list).
func (c *ChunksScreen) Modal() bool {
	switch c.tab {
	case tabSearch:
		return c.typing || c.reading
	case tabBrowse:
		return c.browse.reading
	}
	return false
}

// Open implements Screen: it focuses the query input, or on the debug
// tab reloads the debug view of the branch's last turn, or on the
// browse tab shows the newest turn that has chunks.
func (c *ChunksScreen) Open(s *State) tea.Cmd {
	switch c.tab {
	case tabDebug:
		c.debugSeq = 0
		return c.loadDebug(s)
	case tabBrowse:
		c.browse.seq = 0
		return c.browse.load(s)
	}
	c.reading = false
	return c.focusInput()
}

// OpenArgs implements ArgsScreen: /search Q (or /chunks Q) opens the
// search tab and runs retrieval for Q.
func (c *ChunksScreen) OpenArgs(s *State, args string) tea.Cmd {
	c.tab, c.reading, c.typing = tabSearch, false, false
	c.input.SetValue(strings.TrimSpace(args))
	c.input.Blur()
	return c.search(s)
}

func (c *ChunksScreen) focusInput() tea.Cmd {
	c.typing = true
	return c.input.Focus()
}

// Update implements Screen.
func (c *ChunksScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case chunkHitsMsg:
		if msg.gen != c.gen {
			return nil
		}
		if msg.err != nil {
			c.note = "search failed: " + msg.err.Error()
			return statusErr("search "+quoteQuery(msg.query), msg.err)
		}
		c.hits, c.rows = msg.hits, rowCursor{}
		c.note = fmt.Sprintf("%d chunks for %s", len(msg.hits), quoteQuery(msg.query))
		if len(msg.hits) > 0 {
			c.typing = false
			c.input.Blur()
		}
		return nil
	case chunkDebugMsg:
		if msg.gen != c.debugGen {
			return nil
		}
		c.debugSeq = msg.seq
		if msg.err != nil {
			c.debug = nil
			c.debugNote = debugFailure(msg.seq, msg.err)
			return statusErr(fmt.Sprintf("context of turn %d", msg.seq), msg.err)
		}
		d := msg.debug
		c.debug, c.debugNote = &d, ""
		c.debugPage.set(func(width int) []string { return debugLines(d, msg.seq, width) })
		return nil
	case chunkTurnMsg:
		return c.browse.loaded(msg)
	case tea.KeyPressMsg:
		return c.key(s, msg)
	}
	if c.typing && c.tab == tabSearch {
		var cmd tea.Cmd
		c.input, cmd = c.input.Update(msg)
		return cmd
	}
	return nil
}

func (c *ChunksScreen) key(s *State, msg tea.KeyPressMsg) tea.Cmd {
	k := msg.String()
	if k == "tab" || k == "shift+tab" {
		step := chunkTab(1)
		if k == "shift+tab" {
			step = chunkTabs - 1
		}
		c.tab = (c.tab + step) % chunkTabs
		c.input.Blur()
		switch c.tab {
		case tabDebug:
			if c.debug == nil {
				return c.loadDebug(s)
			}
		case tabBrowse:
			if c.browse.turn == nil {
				return c.browse.load(s)
			}
		case tabSearch:
			if c.typing {
				return c.input.Focus()
			}
		}
		return nil
	}
	switch c.tab {
	case tabDebug:
		return c.debugKey(s, k, msg)
	case tabBrowse:
		return c.browse.key(s, k, msg)
	}
	switch {
	case c.reading:
		switch k {
		case "esc", "enter", "backspace", "q":
			c.reading = false
			return nil
		}
		return c.text.update(msg)
	case c.typing:
		switch k {
		case "enter":
			return c.search(s)
		case "esc":
			c.typing = false
			c.input.Blur()
			return nil
		case "down":
			if len(c.hits) > 0 {
				c.typing = false
				c.input.Blur()
			}
			return nil
		}
		var cmd tea.Cmd
		c.input, cmd = c.input.Update(msg)
		return cmd
	}
	switch k {
	case "up", "k":
		if c.rows.at == 0 {
			return c.focusInput()
		}
		c.rows.move(-1, len(c.hits))
	case "down", "j":
		c.rows.move(1, len(c.hits))
	case "pgup":
		c.rows.move(-10, len(c.hits))
	case "pgdown":
		c.rows.move(10, len(c.hits))
	case "/", "i":
		return c.focusInput()
	case "enter":
		if len(c.hits) > 0 {
			c.reading = true
			c.text.setText(hitText(c.hits[c.rows.at]))
		}
	}
	return nil
}

func (c *ChunksScreen) debugKey(s *State, k string, msg tea.KeyPressMsg) tea.Cmd {
	switch k {
	case "left", "h":
		if c.debugSeq > 1 {
			c.debugSeq--
			return c.loadDebug(s)
		}
		return nil
	case "right", "l":
		if c.debugSeq > 0 && c.debugSeq < s.Info.TurnSeq {
			c.debugSeq++
			return c.loadDebug(s)
		}
		return nil
	case "r":
		return c.loadDebug(s)
	}
	return c.debugPage.update(msg)
}

// search runs the query in the input on the current branch.
func (c *ChunksScreen) search(s *State) tea.Cmd {
	q := strings.TrimSpace(c.input.Value())
	if q == "" {
		c.note = "type a query first"
		return nil
	}
	c.gen++
	gen, k, branch := c.gen, c.K, s.Branch.ID
	if k <= 0 {
		k = DefaultSearchK
	}
	c.query = q
	c.note = "searching for " + quoteQuery(q) + "…"
	return func() tea.Msg {
		hits, err := s.Backend.Search(s.Ctx, branch, q, k)
		return chunkHitsMsg{gen: gen, query: q, hits: hits, err: err}
	}
}

// loadDebug loads the context debug view of turn debugSeq (0: the
// branch's last turn).
func (c *ChunksScreen) loadDebug(s *State) tea.Cmd {
	c.debugGen++
	seq := c.debugSeq
	if seq == 0 {
		seq = s.Info.TurnSeq
	}
	if seq == 0 {
		c.debug, c.debugNote = nil, "No turns yet on this branch: nothing was sent."
		return nil
	}
	c.debugSeq = seq
	c.debugNote = fmt.Sprintf("Loading the context of turn %d…", seq)
	c.debug = nil
	gen, branch := c.debugGen, s.Branch.ID
	return func() tea.Msg {
		d, err := s.Backend.Context(s.Ctx, branch, seq, "")
		return chunkDebugMsg{gen: gen, seq: seq, debug: d, err: err}
	}
}

// View implements Screen.
func (c *ChunksScreen) View(s *State, width, height int) string {
	tabs := make([]string, chunkTabs)
	for i, name := range chunkTabNames {
		tabs[i] = " " + name + " "
		if chunkTab(i) == c.tab {
			tabs[i] = "[" + name + "]"
		}
	}
	lines := []string{strings.TrimRight(strings.Join(tabs, " "), " ") + "   (tab switches)"}
	body := height - 1
	if c.tab == tabBrowse {
		return c.browse.view(s, lines, width, height)
	}
	if c.tab == tabDebug {
		if c.debug == nil {
			return fitScreen(appendWrapped(lines, c.debugNote, width), width, height)
		}
		lines = append(lines, c.debugPage.view(width, max(body-1, 1)), c.debugPage.position())
		return fitScreen(lines, width, height)
	}
	c.input.SetWidth(max(width-len(c.input.Prompt)-1, 1))
	lines = appendWrapped(append(lines, c.input.View()), c.note, width)
	if c.reading && len(c.hits) > 0 {
		lines = append(lines, strings.Repeat("─", width))
		lines = append(lines, c.text.view(width, max(height-len(lines)-1, 1)), c.text.position())
		return fitScreen(lines, width, height)
	}
	if len(c.hits) == 0 {
		return fitScreen(lines, width, height)
	}
	lines = append(lines, "  score  type          turn  text")
	top, end := c.rows.window(height-len(lines), len(c.hits))
	for i := top; i < end; i++ {
		mark := "  "
		if i == c.rows.at && !c.typing {
			mark = "> "
		}
		h := c.hits[i]
		lines = append(lines, fmt.Sprintf("%s%5.3f  %-12s %5s  %s", mark, h.Score, h.Chunk.Type,
			turnNumber(h.Chunk.Seq), firstLine(h.Chunk.Text)))
	}
	return fitScreen(lines, width, height)
}

// Keys implements Screen.
func (c *ChunksScreen) Keys() []key.Binding {
	next := chunkTabNames[(c.tab+1)%chunkTabs]
	tab := key.NewBinding(key.WithKeys("tab", "shift+tab"), key.WithHelp("tab", strings.ToLower(next)))
	switch {
	case c.tab == tabBrowse:
		return c.browse.keys(tab)
	case c.tab == tabDebug:
		return []key.Binding{tab,
			key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "turn")),
			key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "scroll")),
			key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
	case c.reading:
		return []key.Binding{
			key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "scroll")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back to the list"))}
	case c.typing:
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "search")),
			key.NewBinding(key.WithKeys("down"), key.WithHelp("↓", "results")), tab,
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "leave the input"))}
	}
	return []key.Binding{
		key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "read")),
		key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "query")), tab,
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
}

// hitText is a hit's full text with what it is and how it scored.
func hitText(h api.Hit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chunk %s · %s · turn %s · %d tokens\n", idTail(h.Chunk.ID), h.Chunk.Type, turnNumber(h.Chunk.Seq), h.Chunk.TokenEst)
	fmt.Fprintf(&b, "score %.3f (vector %.3f, text %.3f, relevance %.3f)\n\n", h.Score, h.Vector, h.Text, h.Relevance)
	b.WriteString(expandTabs(h.Chunk.Text))
	if h.Chunk.Summary != "" {
		b.WriteString("\n\nSummary: " + expandTabs(h.Chunk.Summary))
	}
	return b.String()
}

// debugFailure says why a turn has no context debug view.
func debugFailure(seq uint64, err error) string {
	if errors.Is(err, ErrNoContext) {
		return fmt.Sprintf("Turn %d recorded no context: it failed before its first step ran, or predates context recipes.", seq)
	}
	return fmt.Sprintf("No context debug view for turn %d: %v", seq, err)
}

// debugLines renders a context debug view for width cells.
func debugLines(d api.ContextDebug, seq uint64, width int) []string {
	p := pageLines{width: width}
	head := fmt.Sprintf("Context of turn %d", seq)
	if seq == 0 {
		head = "Context of the next turn"
	}
	if !d.Step.IsZero() {
		head += " · step " + idTail(d.Step)
	}
	if d.Provider != "" || d.Model != "" {
		head += " · " + d.Provider + "/" + d.Model
	}
	p.text(head)
	switch {
	case d.SentHash == "":
		p.text("Nothing was sent yet: this is the context the next turn would get.")
	case d.Matches:
		p.text("Rebuilt context matches what was sent (hash " + hashHead(d.SentHash) + ").")
	default:
		p.text("Rebuilt context DIFFERS from what was sent: sent " + hashHead(d.SentHash) +
			", rebuilt " + hashHead(d.RebuiltHash) + ".")
	}
	r := d.Report
	fit := "fits"
	if r.Over > 0 {
		fit = fmt.Sprintf("%d over", r.Over)
	}
	p.text(fmt.Sprintf("Tokens: %d of %d input (limit %d - reserve %d - margin %d); %s",
		r.Total, r.Budget.Input(), r.Budget.ContextLimit, r.Budget.ResponseReserve, r.Budget.SafetyMargin, fit))
	var secs []string
	for _, sec := range r.Sections {
		secs = append(secs, fmt.Sprintf("%s %d/%d", sec.Name, sec.Tokens, sec.Items))
	}
	for _, l := range wrapWords("Sections (tokens/items): ", secs, " · ", width) {
		p.row(l)
	}
	givenLines(&p, d)

	packed := make(map[messages.ChunkID]api.ChunkUse, len(r.Chunks))
	for _, u := range r.Chunks {
		packed[u.Chunk] = u
	}
	texts := make(map[messages.ChunkID]string, len(d.Context.Retrieved))
	for _, rc := range d.Context.Retrieved {
		texts[rc.Chunk] = rc.Text
	}
	p.text("")
	p.text(fmt.Sprintf("Retrieval offered %d chunks; %d packed into the context:", len(d.Retrieved), len(r.Chunks)))
	if d.RetrievalError != "" {
		p.text("Retrieval failed: " + d.RetrievalError)
	}
	const rowFormat = "  %5s  %-8s  %-12s %6s  %s"
	if len(d.Retrieved) > 0 || len(r.Chunks) > 0 {
		p.row(fmt.Sprintf(rowFormat, "score", "chunk", "packed", "tokens", "text"))
	}
	offered := make(map[messages.ChunkID]bool, len(d.Retrieved))
	row := func(id messages.ChunkID, score float64, forced bool, suffix string) {
		state, tokens := "no", ""
		if u, ok := packed[id]; ok {
			state, tokens = "yes", fmt.Sprint(u.Tokens)
			if u.Summary {
				state = "as summary"
			}
		}
		if forced {
			state += ", forced"
		}
		p.row(fmt.Sprintf(rowFormat, fmt.Sprintf("%.3f", score), idTail(id), state, tokens, firstLine(texts[id])+suffix))
	}
	for _, ref := range d.Retrieved {
		offered[ref.Chunk] = true
		row(ref.Chunk, ref.Score, ref.Forced, "")
	}
	for _, u := range r.Chunks { // packed without being offered: a rebuild that differs
		if !offered[u.Chunk] {
			row(u.Chunk, u.Score, false, " (not offered)")
		}
	}
	if len(r.Shrink) > 0 {
		p.text("")
		p.text("Shrink steps:")
		for _, st := range r.Shrink {
			p.text(fmt.Sprintf("  %s: %s (saved %d tokens)", st.Step, st.Detail, st.Saved))
		}
	}
	return p.out
}

// givenLines adds to p what the model was given beside the messages,
// when there is any: an API client's system prompt (before the
// runtime's instructions), the tools offered with the tool mode and
// choice, and the client's generation settings.
func givenLines(p *pageLines, d api.ContextDebug) {
	c := d.Context
	if d.ClientSystem != "" {
		p.text("")
		p.text("System prompt (the client's; the runtime's instructions follow):")
		for l := range strings.SplitSeq(d.ClientSystem, "\n") {
			p.text("  " + l)
		}
	}
	if len(c.Tools) > 0 || c.ToolChoice != (messages.ToolChoice{}) {
		choice := c.ToolChoice.Mode
		switch {
		case choice == "":
			choice = "auto"
		case c.ToolChoice.Name != "":
			choice += " " + c.ToolChoice.Name
		}
		p.text("")
		p.text(fmt.Sprintf("Tools offered: %d (mode %s, choice %s)", len(c.Tools), c.ToolMode, choice))
		for _, t := range c.Tools {
			p.row("  " + t.Name + "  " + firstLine(t.Description))
		}
	}
	if !d.Params.IsZero() {
		params, _ := json.Marshal(d.Params)
		p.text("")
		p.text("Settings: " + string(params))
	}
}

// hashHead is the start of a hash, enough to compare two by eye.
func hashHead(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// quoteQuery quotes a query for a status line.
func quoteQuery(q string) string { return fmt.Sprintf("%q", q) }

// turnNumber is a turn's number as screens show it: #N, or - for none.
func turnNumber(seq uint64) string {
	if seq == 0 {
		return "-"
	}
	return fmt.Sprintf("#%d", seq)
}

// The helpers below are shared by the chunks, pending, steps and models
// screens.

// rowCursor is the selected row of a list and the first row shown.
type rowCursor struct{ at, top int }

// move moves the selection by d rows within n rows.
func (r *rowCursor) move(d, n int) {
	r.at = max(0, min(r.at+d, n-1))
}

// window returns the rows [top, end) of n to show in rows lines,
// scrolled so that the selection is visible.
func (r *rowCursor) window(rows, n int) (int, int) {
	rows = max(rows, 1)
	if r.at < r.top {
		r.top = r.at
	}
	if r.at >= r.top+rows {
		r.top = r.at - rows + 1
	}
	r.top = max(0, min(r.top, n-rows))
	return r.top, min(n, r.top+rows)
}

// fitScreen renders lines (which may hold newlines) in width×height
// cells: each line cut to width, at most height lines, padded with empty
// lines to height.
func fitScreen(lines []string, width, height int) string {
	if height <= 0 || width <= 0 {
		return ""
	}
	all := strings.Split(strings.Join(lines, "\n"), "\n")
	out := make([]string, height)
	for i := 0; i < height && i < len(all); i++ {
		out[i] = ansi.Truncate(strings.TrimRight(expandTabs(all[i]), " "), width, "…")
	}
	return strings.Join(out, "\n")
}

// wrapWords lays items out after prefix, separated by sep, over as many
// lines of width cells as they need; continuation lines are indented.
func wrapWords(prefix string, items []string, sep string, width int) []string {
	if len(items) == 0 {
		return []string{prefix + "none"}
	}
	var out []string
	line := prefix
	fresh := true
	for _, it := range items {
		next := it
		if !fresh {
			next = sep + it
		}
		if !fresh && width > 0 && ansi.StringWidth(line+next) > width {
			out = append(out, strings.TrimRight(line+sep, " "))
			line, next = "  ", it
		}
		line += next
		fresh = false
	}
	return append(out, line)
}

// scrollPage is a page of text scrolled in a viewport, laid out again
// for the width it is shown at.
type scrollPage struct {
	vp     viewport.Model
	render func(width int) []string
	width  int // the width the content was laid out for
}

func newScrollPage() scrollPage {
	return scrollPage{vp: viewport.New(), render: func(int) []string { return nil }}
}

// set makes render the page's content, shown from its top.
func (p *scrollPage) set(render func(width int) []string) {
	p.render, p.width = render, 0
	p.vp.GotoTop()
}

// setText makes text, wrapped, the page's content.
func (p *scrollPage) setText(text string) {
	p.set(func(width int) []string {
		l := pageLines{width: width}
		l.text(text)
		return l.out
	})
}

// update scrolls the page on keys.
func (p *scrollPage) update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	p.vp, cmd = p.vp.Update(msg)
	return cmd
}

// view renders the visible part of the page in width×height.
func (p *scrollPage) view(width, height int) string {
	p.vp.SetWidth(width)
	p.vp.SetHeight(height)
	if p.width != width {
		p.width = width
		p.vp.SetContent(strings.Join(p.render(width), "\n"))
	}
	return p.vp.View()
}

// position says which lines view showed, when they are not all.
func (p *scrollPage) position() string {
	total, top := p.vp.TotalLineCount(), p.vp.YOffset()
	if total <= p.vp.Height() && top == 0 {
		return ""
	}
	return fmt.Sprintf("lines %d-%d of %d (↑/↓ pgup/pgdn scroll)", top+1, min(top+p.vp.Height(), total), total)
}

// pageLines builds the lines of a page width cells wide: text is
// wrapped, rows (of tables) are cut.
type pageLines struct {
	width int
	out   []string
}

func (p *pageLines) text(s string) {
	for l := range strings.SplitSeq(expandTabs(s), "\n") {
		p.out = append(p.out, strings.Split(ansi.Wrap(l, max(p.width, 1), ""), "\n")...)
	}
}

func (p *pageLines) row(s string) {
	p.out = append(p.out, ansi.Truncate(strings.TrimRight(expandTabs(s), " "), p.width, "…"))
}

// appendWrapped appends text to lines, wrapped at width cells.
func appendWrapped(lines []string, text string, width int) []string {
	return append(lines, strings.Split(ansi.Wrap(text, max(width, 1), ""), "\n")...)
}

// firstLine is the first line of s that is not blank, trimmed.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			return t
		}
	}
	return ""
}

// expandTabs replaces tabs by spaces, which every terminal shows alike.
func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

// idTail is the last 8 characters of an id: the random part of a ULID,
// enough to tell ids apart on a screen.
func idTail(id fmt.Stringer) string {
	s := id.String()
	if len(s) > 8 {
		return s[len(s)-8:]
	}
	return s
}

// byteSize is n bytes for a reader: 512 B, 1.2 KB, 3.4 MB.
func byteSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
}

// statusErr is a command telling the shell that what failed with err.
func statusErr(what string, err error) tea.Cmd {
	return func() tea.Msg { return StatusMsg{Text: what, Err: err} }
}

// statusText is a command showing text on the shell's status line.
func statusText(text string) tea.Cmd {
	return func() tea.Msg { return StatusMsg{Text: text} }
}
