package gravitinotest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Audit is Gravitino's AuditDTO; empty fields are omitted, as Gravitino
// omits nulls.
type Audit struct {
	Creator          string `json:"creator,omitempty"`
	CreateTime       string `json:"createTime,omitempty"`
	LastModifier     string `json:"lastModifier,omitempty"`
	LastModifiedTime string `json:"lastModifiedTime,omitempty"`
}

// Job is Gravitino's JobDTO, exactly: it carries no jobConf.
type Job struct {
	JobID           string `json:"jobId"`
	JobTemplateName string `json:"jobTemplateName"`
	Status          Status `json:"status"`
	Audit           Audit  `json:"audit"`
}

// JobTemplate is a job template (ShellJobTemplateDTO or SparkJobTemplateDTO).
// It marshals as the DTO of its JobType: a shell template has "scripts", a
// spark one "className", "jars", "files", "archives" and "configs".
type JobTemplate struct {
	JobType      string            `json:"jobType"`
	Name         string            `json:"name"`
	Comment      *string           `json:"comment,omitempty"`
	Executable   string            `json:"executable"`
	Arguments    []string          `json:"arguments"`
	Environments map[string]string `json:"environments"`
	CustomFields map[string]string `json:"customFields"`
	Scripts      []string          `json:"scripts,omitempty"`
	ClassName    string            `json:"className,omitempty"`
	Jars         []string          `json:"jars,omitempty"`
	Files        []string          `json:"files,omitempty"`
	Archives     []string          `json:"archives,omitempty"`
	Configs      map[string]string `json:"configs,omitempty"`
	Audit        *Audit            `json:"audit,omitempty"`
}

// MarshalJSON writes the template as Gravitino's DTO of its type, with empty
// lists and maps as [] and {}.
func (t JobTemplate) MarshalJSON() ([]byte, error) {
	type common struct {
		JobType      string            `json:"jobType"`
		Name         string            `json:"name"`
		Comment      *string           `json:"comment,omitempty"`
		Executable   string            `json:"executable"`
		Arguments    []string          `json:"arguments"`
		Environments map[string]string `json:"environments"`
		CustomFields map[string]string `json:"customFields"`
		Audit        *Audit            `json:"audit,omitempty"`
	}
	c := common{
		JobType: t.JobType, Name: t.Name, Comment: t.Comment, Executable: t.Executable,
		Arguments: orEmpty(t.Arguments), Environments: orEmptyMap(t.Environments),
		CustomFields: orEmptyMap(t.CustomFields), Audit: t.Audit,
	}
	if t.JobType == "spark" {
		return json.Marshal(struct {
			common
			ClassName string            `json:"className"`
			Jars      []string          `json:"jars"`
			Files     []string          `json:"files"`
			Archives  []string          `json:"archives"`
			Configs   map[string]string `json:"configs"`
		}{c, t.ClassName, orEmpty(t.Jars), orEmpty(t.Files), orEmpty(t.Archives), orEmptyMap(t.Configs)})
	}
	return json.Marshal(struct {
		common
		Scripts []string `json:"scripts"`
	}{c, orEmpty(t.Scripts)})
}

// ErrorResponse is Gravitino's error body.
type ErrorResponse struct {
	Code    int      `json:"code"`
	Type    string   `json:"type"`
	Message string   `json:"message"`
	Stack   []string `json:"stack"`
}

// Run is the server's record of one job run, for tests to check.
type Run struct {
	JobID    string
	Metalake string
	Template string
	// JobConf is the jobConf of the run request (JSON nulls left out).
	JobConf map[string]string
	// Status is the status the API reports.
	Status Status
	// ExecutorStatus is the executor's own status (ahead of Status when
	// Config.StatusPullInterval is set).
	ExecutorStatus Status
	// Creator is the principal that ran the job.
	Creator string
	// Executable is the template's executable as registered.
	Executable string
	// Argv is the command line executed: the executable linked into Dir,
	// then the rendered arguments (prefixed by /bin/sh when the executable
	// is a script without "#!", as Java's ProcessBuilder falls back to).
	Argv []string
	// EnvAdded is the rendered template environments added to the base
	// environment.
	EnvAdded map[string]string
	// CustomFields is the rendered template customFields.
	CustomFields map[string]string
	// Dir is the job's staging folder and working directory.
	Dir string
	// StdoutPath and StderrPath are the files of the process's output
	// (output.log and error.log in Dir).
	StdoutPath, StderrPath string
	// PID is the process id (also its process group id), 0 if never started.
	PID int
	// Exited reports that the process has ended.
	Exited bool
	// ExitCode is the exit status as Java's Process.waitFor reports it:
	// the code, or 128+N after signal N.
	ExitCode int
	// Signal names the signal that ended the process, if any.
	Signal string
	// StartError is why the process could not start, if it could not.
	StartError string
	// CancelRequested reports that a cancel reached the executor.
	CancelRequested bool
	// Deleted reports that the run's template was deleted with its runs.
	Deleted bool
	// CreateTime, StartTime and EndTime are when the run was created,
	// started and ended (zero if not yet).
	CreateTime, StartTime, EndTime time.Time
}

// Request is one request the server received.
type Request struct {
	Time   time.Time
	Method string
	// Path is the URL path; Query the raw query.
	Path, Query string
	// Header is every request header, as received.
	Header http.Header
	// Accept and ContentType are those headers.
	Accept, ContentType string
	// HasAuthorization reports an Authorization header; AuthScheme is its
	// first word (e.g. "Bearer").
	HasAuthorization bool
	AuthScheme       string
	// Body is the request body.
	Body []byte
	// Fault is the fault injected into this request (0 if none).
	Fault FaultKind
	// Status is the HTTP status answered; 0 if the connection was reset or
	// the answer is not written yet.
	Status int
}

// Text is the request as one string (method, URL, headers, body), for
// grepping.
func (r Request) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Method, r.Path)
	if r.Query != "" {
		b.WriteString("?" + r.Query)
	}
	b.WriteString("\n")
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.Write(r.Body)
	return b.String()
}
