package server

import (
	"net/http"
	"strings"
)

// The models a branch can select (PUT .../model, a proxied request's
// model): GET /v1/models lists them, a page at a time as the other lists
// (?limit, ?cursor; next when more follow; in Anthropic's shape also its
// after_id, has_more, first_id and last_id), GET /v1/models/{model}
// answers one.
// The branches' default comes first, as "default" (the model a branch
// that selected none uses), then each configured model by its name. A
// request of Anthropic's SDKs (it carries anthropic-version or
// x-api-key) is answered in Anthropic's shape, any other in OpenAI's.

// apiModel is a model as the APIs list it.
type apiModel struct {
	name, provider, id string
}

// apiModels are the models a branch can select, "default" first.
func (s *Server) apiModels() []apiModel {
	provider, id := s.rt.DefaultModel()
	out := []apiModel{{"default", provider, id}}
	for _, name := range s.rt.ModelNames() {
		p, id, _ := s.rt.ModelInfo(name)
		out = append(out, apiModel{name, p, id})
	}
	return out
}

// openAIModel is a model in the OpenAI API's shape, with the provider
// that serves it as owned_by.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	ModelID string `json:"model_id"` // the provider's id of the model
}

// anthropicModel is a model in Anthropic's shape.
type anthropicModel struct {
	Type        string `json:"type"` // "model"
	ID          string `json:"id"`
	DisplayName string `json:"display_name"` // the name, the provider and its id of the model
	CreatedAt   string `json:"created_at"`   // unknown: the Unix epoch
}

func (m apiModel) openAI() openAIModel {
	return openAIModel{ID: m.name, Object: "model", OwnedBy: m.provider, ModelID: m.id}
}

func (m apiModel) anthropic() anthropicModel {
	return anthropicModel{Type: "model", ID: m.name, DisplayName: m.name + " (" + m.provider + " " + m.id + ")",
		CreatedAt: "1970-01-01T00:00:00Z"}
}

// anthropicSDK reports whether r is a request of Anthropic's SDKs,
// which send anthropic-version (and their key as x-api-key).
func anthropicSDK(r *http.Request) bool {
	return r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != ""
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	p, err := pageOf(r, listModels, anyKeyLen, false)
	if err != nil {
		return err
	}
	anthropic := anthropicSDK(r)
	q := r.URL.Query()
	if q.Has("before_id") {
		return invalid("before_id: not taken; page forward with after_id or cursor")
	}
	if a := q.Get("after_id"); a != "" { // Anthropic's own paging: after the model with that id
		if p.after != nil {
			return invalid("after_id and cursor: send one of them")
		}
		p.after = []byte(a)
	}
	ms := s.apiModels()
	if p.after != nil {
		ms = ms[modelsAfter(ms, string(p.after)):]
	}
	page, more := ms[:min(len(ms), p.limit)], len(ms) > p.limit
	next := ""
	if more {
		next = p.next(listModels, []byte(page[len(page)-1].name))
	}
	if anthropic {
		out := make([]anthropicModel, len(page))
		for i, m := range page {
			out[i] = m.anthropic()
		}
		body := map[string]any{"data": out, "has_more": more, "first_id": nil, "last_id": nil}
		if len(out) > 0 {
			body["first_id"], body["last_id"] = out[0].ID, out[len(out)-1].ID
		}
		if more {
			body["next"] = next
		}
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	out := make([]openAIModel, len(page))
	for i, m := range page {
		out[i] = m.openAI()
	}
	body := map[string]any{"object": "list", "data": out}
	if more {
		body["next"] = next
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// modelsAfter is the index in ms (apiModels: "default", then the
// configured names in order) of the first model after the one named
// name, whether or not it is still configured.
func modelsAfter(ms []apiModel, name string) int {
	if name == "default" {
		return 1
	}
	for i, m := range ms {
		if i > 0 && m.name > name {
			return i
		}
	}
	return len(ms)
}

// getModel is GET /v1/models/{model}: one of the models, by the name
// the list gives it. Any other name is 404 (a proxied request that
// names it runs on its conversation's model).
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("model")
	ms := s.apiModels()
	names := make([]string, len(ms))
	for i, m := range ms {
		if m.name == name {
			if anthropicSDK(r) {
				writeJSON(w, http.StatusOK, m.anthropic())
			} else {
				writeJSON(w, http.StatusOK, m.openAI())
			}
			return nil
		}
		names[i] = m.name
	}
	return notFound("model %q: not one of this server's models (%s); a request that names another model runs on its conversation's model",
		name, strings.Join(names, ", "))
}
