package mcpdoor

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/shedfs/shedfs/acl"
	"github.com/shedfs/shedfs/agentfs"
	"github.com/shedfs/shedfs/daemon"
	"github.com/shedfs/shedfs/web"
)

// Admin is what the tools that are not about one file's bytes call: the
// admin API's own operations (daemon.Local, as `shedfs quota`, `trash`,
// `restore`, `link` and `group` use them), asked as the call's user, so
// that no rule of the trash, links or quotas is written twice. The token's
// grant is checked first, here, as for every tool.
type Admin interface {
	ShowUser(ctx context.Context, name string) (*daemon.UserInfo, error)
	ShowQuota(ctx context.Context, holder string) ([]daemon.QuotaInfo, error)
	ShowGroup(ctx context.Context, name string) (*daemon.GroupInfo, error)
	ListTrash(ctx context.Context, req daemon.TrashListRequest) ([]daemon.TrashEntry, error)
	RestoreTrash(ctx context.Context, req daemon.TrashRestoreRequest) ([]daemon.TrashRestored, error)
	RestoreAt(ctx context.Context, req daemon.RestoreAtRequest) (*daemon.RestoreAtResult, error)
	CreateLink(ctx context.Context, req daemon.LinkCreateRequest) (*daemon.LinkInfo, error)
	ListLinks(ctx context.Context, user string) ([]daemon.LinkInfo, error)
	RevokeLink(ctx context.Context, id string) error
}

var _ Admin = (*daemon.Local)(nil)

// adminError is the typed answer for an error of the admin operations.
func adminError(err error) error {
	var ae *agentfs.Error
	if err == nil || errors.As(err, &ae) {
		return err
	}
	var de *daemon.Error
	if !errors.As(err, &de) {
		return agentfs.AsError(err)
	}
	code := agentfs.CodeInternal
	switch de.Code {
	case daemon.CodeNotFound:
		code = agentfs.CodeNotFound
	case daemon.CodeExists:
		code = agentfs.CodeExists
	case daemon.CodeInvalid:
		code = agentfs.CodeInvalidArgument
	case daemon.CodeForbidden, daemon.CodeInfected:
		code = agentfs.CodePermissionDenied
	case daemon.CodeQuota:
		code = agentfs.CodeQuotaExceeded
	case daemon.CodeNoSpace:
		code = agentfs.CodeNoSpace
	case daemon.CodeTooLarge:
		code = agentfs.CodeFileTooLarge
	}
	return &agentfs.Error{Code: code, Message: de.Message}
}

// mainView refuses a path-naming admin call from a session's view, whose
// paths the admin operations (which act in the user's main view) do not
// name.
func mainView(f *agentfs.FS, what string) error {
	if f.View().Session() != "" {
		return &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: what + " acts in your main view, not in a session: ask from outside the session"}
	}
	return nil
}

type quotaOut struct {
	User   daemon.QuotaInfo   `json:"user"`
	Groups []daemon.QuotaInfo `json:"groups"`
}

type groupsOut struct {
	Groups []daemon.GroupInfo `json:"groups"`
}

type trashListIn struct {
	Path  string `json:"path,omitempty" jsonschema:"only what was deleted at or below this path"`
	Since string `json:"since,omitempty" jsonschema:"only what was deleted since this time (RFC 3339, such as 2026-11-27T09:00:00Z)"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most entries to answer, newest first (default and maximum: the server's bound)"`
}

type trashListOut struct {
	Entries   []daemon.TrashEntry `json:"entries"`
	Truncated bool                `json:"truncated,omitempty"`
}

type trashRestoreIn struct {
	Entries []string `json:"entries" jsonschema:"the entries to restore, as trash_list answers them (its entry field)"`
	To      string   `json:"to,omitempty" jsonschema:"restore to this path instead (one entry), or into this directory (several); default: where each was"`
}

type trashRestoreOut struct {
	Restored []daemon.TrashRestored `json:"restored"`
}

type restoreAtIn struct {
	Path   string `json:"path" jsonschema:"the file or directory to put back as it was, such as output/report"`
	At     string `json:"at" jsonschema:"the time, RFC 3339 (2026-11-27T09:00:00Z)"`
	DryRun bool   `json:"dry_run,omitempty" jsonschema:"only list what would be done"`
}

type linkCreateIn struct {
	Path string `json:"path" jsonschema:"the file or directory to share by link"`
	TTL  string `json:"ttl,omitempty" jsonschema:"how long the link lives, such as 2h or 7d (default: the store's)"`
}

type linkOut struct {
	daemon.LinkInfo
	// Markdown is a link to paste into an answer.
	Markdown string `json:"markdown"`
}

type linksOut struct {
	Links []daemon.LinkInfo `json:"links"`
}

type linkDeleteIn struct {
	ID string `json:"id" jsonschema:"the link's id, as links_list answers it"`
}

func (s *Server) addAdminTools() {
	a := s.opts.Admin
	if a == nil {
		return
	}
	lim := s.opts.Limits
	tool(s, "quota", "Show quota and usage",
		"Your quota and usage (bytes and files; the trash's share, evicted first when space is short) and those of your groups.",
		true, false, func(ctx context.Context, f *agentfs.FS, in struct{}) (*quotaOut, error) {
			if err := f.AllowTool(acl.AccessList, acl.OpRead); err != nil {
				return nil, err
			}
			user := f.View().User()
			u, err := a.ShowUser(ctx, user)
			if err != nil {
				return nil, adminError(err)
			}
			out := &quotaOut{Groups: []daemon.QuotaInfo{}}
			q, err := a.ShowQuota(ctx, "user:"+user)
			if err != nil || len(q) != 1 {
				return nil, adminError(err)
			}
			out.User = q[0]
			for _, g := range u.Groups {
				q, err := a.ShowQuota(ctx, "group:"+g)
				if err != nil {
					return nil, adminError(err)
				}
				out.Groups = append(out.Groups, q...)
			}
			return out, nil
		})
	tool(s, "groups", "List your groups",
		"The groups you are a member of (each is a directory groups/NAME), with their members, usage and quota.",
		true, false, func(ctx context.Context, f *agentfs.FS, in struct{}) (*groupsOut, error) {
			if err := f.AllowTool(acl.AccessList, acl.OpRead); err != nil {
				return nil, err
			}
			u, err := a.ShowUser(ctx, f.View().User())
			if err != nil {
				return nil, adminError(err)
			}
			out := &groupsOut{Groups: []daemon.GroupInfo{}}
			for _, g := range u.Groups {
				gi, err := a.ShowGroup(ctx, g)
				if err != nil {
					return nil, adminError(err)
				}
				out.Groups = append(out.Groups, *gi)
			}
			return out, nil
		})
	tool(s, "trash_list", "List the trash",
		"What was deleted or overwritten and is kept in the trash (yours, share/'s and your groups'), newest first: each entry's name is what trash_restore takes.",
		true, false, func(ctx context.Context, f *agentfs.FS, in trashListIn) (*trashListOut, error) {
			if err := f.AllowTool(acl.AccessList, acl.OpRead); err != nil {
				return nil, err
			}
			req := daemon.TrashListRequest{User: f.View().User()}
			if in.Path != "" {
				clean, err := f.Allow(acl.AccessList, in.Path, acl.OpRead)
				if err != nil {
					return nil, err
				}
				req.Path = clean
			}
			if in.Since != "" {
				t, err := time.Parse(time.RFC3339, in.Since)
				if err != nil {
					return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: "since: a time such as 2026-11-27T09:00:00Z"}
				}
				req.Since = t
			}
			list, err := a.ListTrash(ctx, req)
			if err != nil {
				return nil, adminError(err)
			}
			n := in.Limit
			if n <= 0 || n > lim.MaxList {
				n = lim.MaxList
			}
			out := &trashListOut{Entries: []daemon.TrashEntry{}}
			for i := len(list) - 1; i >= 0; i-- {
				if !f.Visible(list[i].Path) {
					continue
				}
				if len(out.Entries) >= n {
					out.Truncated = true
					break
				}
				out.Entries = append(out.Entries, list[i])
			}
			return out, nil
		})
	tool(s, "trash_restore", "Restore from the trash",
		"Put entries of the trash back where they were (or to another path): a file standing there goes to the trash in its place.",
		false, false, func(ctx context.Context, f *agentfs.FS, in trashRestoreIn) (*trashRestoreOut, error) {
			if err := mainView(f, "trash_restore"); err != nil {
				return nil, err
			}
			if len(in.Entries) == 0 {
				return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: "give the entries to restore (trash_list names them)"}
			}
			user := f.View().User()
			// The grant covers where each entry was (what it restores)
			// and where it goes.
			list, err := a.ListTrash(ctx, daemon.TrashListRequest{User: user})
			if err != nil {
				return nil, adminError(err)
			}
			where := map[string]string{}
			for _, e := range list {
				where[e.Entry] = e.Path
			}
			for _, name := range in.Entries {
				p, ok := where[name]
				if !ok {
					return nil, &agentfs.Error{Code: agentfs.CodeNotFound, Path: name, Message: "no such entry in your trash (trash_list names them)"}
				}
				access := acl.AccessDelete
				if in.To == "" {
					access |= acl.AccessWrite
				}
				if _, err := f.Allow(access, p, acl.OpCreate); err != nil {
					return nil, err
				}
			}
			if in.To != "" {
				if _, err := f.Allow(acl.AccessDelete|acl.AccessWrite, in.To, acl.OpCreate); err != nil {
					return nil, err
				}
			}
			res, err := a.RestoreTrash(ctx, daemon.TrashRestoreRequest{User: user, Entries: in.Entries, To: in.To})
			if err != nil {
				return nil, adminError(err)
			}
			return &trashRestoreOut{Restored: res}, nil
		})
	tool(s, "restore_at", "Restore a subtree to a time",
		"Put a file or directory back as it was at a time in the past (files changed since go to the trash, so this can be undone by another restore). dry_run lists the steps without doing them.",
		false, true, func(ctx context.Context, f *agentfs.FS, in restoreAtIn) (*daemon.RestoreAtResult, error) {
			if err := mainView(f, "restore_at"); err != nil {
				return nil, err
			}
			at, err := time.Parse(time.RFC3339, in.At)
			if err != nil {
				return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: "at: a time such as 2026-11-27T09:00:00Z"}
			}
			access := acl.AccessDelete | acl.AccessWrite
			if in.DryRun {
				access = acl.AccessList
			}
			clean, err := f.Allow(access, in.Path, acl.OpCreate)
			if err != nil {
				return nil, err
			}
			if clean == "" {
				return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: "name a zone or a path in one (output/report), not the whole view"}
			}
			res, err := a.RestoreAt(ctx, daemon.RestoreAtRequest{User: f.View().User(), Path: clean, At: at, DryRun: in.DryRun})
			return res, adminError(err)
		})
	tool(s, "links_create", "Share by link",
		"Make a link that lets anyone with it download a file (or browse a directory) without an account, until it expires. The answer holds a Markdown link to give to a person.",
		false, false, func(ctx context.Context, f *agentfs.FS, in linkCreateIn) (*linkOut, error) {
			if err := mainView(f, "links_create"); err != nil {
				return nil, err
			}
			return s.link(ctx, f, in.Path, in.TTL)
		})
	tool(s, "links_list", "List your links",
		"The live links you made: id, path, URL, expiry, downloads.",
		true, false, func(ctx context.Context, f *agentfs.FS, in struct{}) (*linksOut, error) {
			if err := f.AllowTool(acl.AccessList, acl.OpRead); err != nil {
				return nil, err
			}
			list, err := a.ListLinks(ctx, f.View().User())
			if err != nil {
				return nil, adminError(err)
			}
			out := &linksOut{Links: []daemon.LinkInfo{}}
			for _, l := range list {
				if f.Visible(l.Path) && len(out.Links) < lim.MaxList {
					out.Links = append(out.Links, l)
				}
			}
			return out, nil
		})
	tool(s, "links_delete", "Revoke a link",
		"Revoke one of your links: it stops working at once.",
		false, true, func(ctx context.Context, f *agentfs.FS, in linkDeleteIn) (okOut, error) {
			list, err := a.ListLinks(ctx, f.View().User())
			if err != nil {
				return okOut{}, adminError(err)
			}
			for _, l := range list {
				if l.ID != in.ID {
					continue
				}
				if _, err := f.Allow(acl.AccessMetadata, l.Path, acl.OpSetattr); err != nil {
					return okOut{}, err
				}
				if err := a.RevokeLink(ctx, in.ID); err != nil {
					return okOut{}, adminError(err)
				}
				return okOut{OK: true, Path: l.Path}, nil
			}
			return okOut{}, &agentfs.Error{Code: agentfs.CodeNotFound, Message: fmt.Sprintf("you have no link %s (links_list shows yours)", in.ID)}
		})
}

// link makes a link to p as the call's user.
func (s *Server) link(ctx context.Context, f *agentfs.FS, p, ttl string) (*linkOut, error) {
	info, err := f.Stat(p)
	if err != nil {
		return nil, err
	}
	if _, err := f.Allow(acl.AccessRead|acl.AccessMetadata, info.Path, acl.OpSetattr); err != nil {
		return nil, err
	}
	l, err := s.opts.Admin.CreateLink(ctx, daemon.LinkCreateRequest{User: f.View().User(), Path: info.Path, TTL: ttl})
	if err != nil {
		return nil, adminError(err)
	}
	return &linkOut{LinkInfo: *l, Markdown: fmt.Sprintf("[%s](%s)", mdText(path.Base(info.Path)), l.URL)}, nil
}

// mdText escapes what would end a Markdown link's text.
func mdText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

type pageIn struct {
	Title   string `json:"title" jsonschema:"the page's title; its file name is made from it"`
	Content string `json:"content" jsonschema:"the page's content, in the format given"`
	Format  string `json:"format,omitempty" jsonschema:"markdown (default) or html"`
}

type pageOut struct {
	agentfs.Info
	// URL and Markdown are a link to the page, when a link server runs.
	URL      string `json:"url,omitempty"`
	Markdown string `json:"markdown,omitempty"`
	// Content is the page's Markdown, to show as it is.
	Content string `json:"content,omitempty"`
	// Note says why there is no link.
	Note string `json:"note,omitempty"`
}

// slug is a file name made of title.
func slug(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 80 {
			break
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	if s == "" {
		s = "result"
	}
	return s
}

func (s *Server) addPageTool() {
	lim := s.opts.Limits
	tool(s, "save_result_page", "Save a result page",
		"Save a result as a page in output/ (a Markdown or HTML file named after its title) and answer its link when the link server runs (the link server shows Markdown as a page), and for Markdown the content, to show as it is.",
		false, false, func(ctx context.Context, f *agentfs.FS, in pageIn) (*pageOut, error) {
			if strings.TrimSpace(in.Title) == "" {
				return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: "give the page a title"}
			}
			ext, body := ".md", in.Content
			switch in.Format {
			case "", "markdown", "md":
				if !strings.HasPrefix(strings.TrimSpace(body), "#") {
					body = "# " + in.Title + "\n\n" + body
				}
			case "html":
				ext = ".html"
				if !strings.Contains(strings.ToLower(body), "<html") {
					body = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + htmlEscape(in.Title) + "</title></head>\n<body>\n" + body + "\n</body></html>\n"
				}
			default:
				return nil, &agentfs.Error{Code: agentfs.CodeInvalidArgument, Message: "format: markdown or html"}
			}
			if len(body) > lim.MaxWrite {
				return nil, &agentfs.Error{Code: agentfs.CodeFileTooLarge, Message: fmt.Sprintf("%d bytes, more than the %d a page takes", len(body), lim.MaxWrite)}
			}
			base := "output/" + slug(in.Title)
			var info agentfs.Info
			var err error
			for i := 1; i <= 100; i++ {
				p := base + ext
				if i > 1 {
					p = fmt.Sprintf("%s-%d%s", base, i, ext)
				}
				info, err = f.Write(ctx, p, []byte(body), agentfs.CreateOnly, "")
				if err == nil || agentfs.AsError(err).Code != agentfs.CodeExists {
					break
				}
			}
			if err != nil {
				return nil, err
			}
			out := &pageOut{Info: info}
			if ext == ".md" {
				out.Content = body
			}
			switch {
			case s.opts.Admin == nil:
				out.Note = "no link: links are made by the daemon (shedfs serve)"
			case f.View().Session() != "":
				out.Note = "no link from a session's view"
			default:
				l, err := s.link(ctx, f, info.Path, "")
				if err != nil {
					if errors.Is(err, web.ErrNotServing) || strings.Contains(err.Error(), web.ErrNotServing.Error()) {
						out.Note = "no link: no link server runs (shedfs serve --http)"
					} else {
						out.Note = "no link: " + err.Error()
					}
					break
				}
				out.URL, out.Markdown = l.URL, fmt.Sprintf("[%s](%s)", mdText(in.Title), l.URL)
			}
			return out, nil
		})
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
