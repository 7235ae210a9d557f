package objstore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// httpObject is a file behind an http(s) URL, read by range requests.
type httpObject struct {
	store *Store
	url   string
	etag  string // strong ETag from the HEAD, "" if none
}

func httpStatusError(resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return &StatusError{Code: resp.StatusCode, Msg: strings.TrimSpace(resp.Status + " " + string(msg))}
}

func (s *Store) openHTTP(ctx context.Context, url string) (File, error) {
	var size int64
	var etag string
	err := s.retry(ctx, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
		if err != nil {
			return err
		}
		resp, err := s.http.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			return fmt.Errorf("%w (%v)", ErrNotFound, httpStatusError(resp))
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%w (%v)", ErrDenied, httpStatusError(resp))
		case resp.StatusCode != http.StatusOK:
			return httpStatusError(resp)
		}
		if resp.ContentLength < 0 {
			return fmt.Errorf("the server does not say the size (no Content-Length)")
		}
		size = resp.ContentLength
		if e := resp.Header.Get("ETag"); e != "" && !strings.HasPrefix(e, "W/") {
			etag = e
		}
		return nil
	})
	if err != nil {
		return nil, &NamedError{Name: url, Err: err}
	}
	return newRemoteFile(s, url, size, etag, &httpObject{store: s, url: url, etag: etag}), nil
}

func (o *httpObject) fetchRange(ctx context.Context, off int64, p []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1))
	if o.etag != "" {
		req.Header.Set("If-Match", o.etag)
	}
	resp, err := o.store.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		return &NamedError{Name: o.url, Err: fmt.Errorf("the server ignored the range request (200 instead of 206): range requests are required")}
	case http.StatusNotFound, http.StatusGone, http.StatusPreconditionFailed:
		return &NamedError{Name: o.url, Err: fmt.Errorf("%w: deleted or replaced since it was opened (%v)", ErrVanished, httpStatusError(resp))}
	default:
		return httpStatusError(resp)
	}
	if _, err := io.ReadFull(resp.Body, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}
