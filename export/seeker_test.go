package export

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/aetheriot/aether-audit/domain"
)

// storeSample commits a gzipped CSV alarm export and returns its key and
// stored bytes.
func storeSample(t *testing.T, b *blob.Bucket) (string, []byte) {
	t.Helper()
	key := Key("t", "p", uuid.New(), 1, domain.DataExportCSV, domain.DataExportGzip)
	w, err := CreateObject(context.Background(), b, key, domain.DataExportAlarm, domain.DataExportCSV, domain.DataExportGzip, 0)
	require.NoError(t, err)
	require.NoError(t, writeRows(w, domain.DataExportAlarm, 200))
	_, err = w.Commit()
	require.NoError(t, err)
	return key, readObject(t, b, key)
}

func TestObjectReaderRanges(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := d.open(t)
			key, want := storeSample(t, b)
			size := int64(len(want))
			r, err := NewObjectReader(context.Background(), b, key)
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			require.Equal(t, size, r.Size())
			require.Equal(t, "application/gzip", r.ContentType())

			all, err := io.ReadAll(r)
			require.NoError(t, err)
			require.Equal(t, want, all)

			rng := rand.New(rand.NewPCG(1, 2))
			for range 50 {
				from := rng.Int64N(size)
				n := rng.Int64N(size - from + 1)
				pos, err := r.Seek(from, io.SeekStart)
				require.NoError(t, err)
				require.Equal(t, from, pos)
				got := make([]byte, n)
				_, err = io.ReadFull(r, got)
				require.NoError(t, err)
				require.Equal(t, want[from:from+n], got)
			}

			// Relative seeks.
			pos, err := r.Seek(-10, io.SeekEnd)
			require.NoError(t, err)
			require.Equal(t, size-10, pos)
			pos, err = r.Seek(-5, io.SeekCurrent)
			require.NoError(t, err)
			require.Equal(t, size-15, pos)
			tail, err := io.ReadAll(r)
			require.NoError(t, err)
			require.Equal(t, want[size-15:], tail)

			// At and past the end.
			n, err := r.Read(make([]byte, 4))
			require.Zero(t, n)
			require.ErrorIs(t, err, io.EOF)
			_, err = r.Seek(size+100, io.SeekStart)
			require.NoError(t, err)
			_, err = r.Read(make([]byte, 4))
			require.ErrorIs(t, err, io.EOF)

			// Invalid seeks leave the offset alone.
			_, err = r.Seek(0, io.SeekStart)
			require.NoError(t, err)
			_, err = r.Seek(-1, io.SeekStart)
			require.Error(t, err)
			_, err = r.Seek(0, 42)
			require.Error(t, err)
			pos, err = r.Seek(0, io.SeekCurrent)
			require.NoError(t, err)
			require.Zero(t, pos)

			// Reading after Close reopens.
			require.NoError(t, r.Close())
			head := make([]byte, 16)
			_, err = io.ReadFull(r, head)
			require.NoError(t, err)
			require.Equal(t, want[:16], head)
		})
	}
}

func TestObjectReaderMissingObject(t *testing.T) {
	t.Parallel()
	_, err := NewObjectReader(context.Background(), drivers[0].open(t), "exports/none")
	require.Error(t, err)
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))
}

func TestObjectReaderServeContentRange(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := d.open(t)
			key, want := storeSample(t, b)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				r, err := NewObjectReader(req.Context(), b, key)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				defer r.Close()
				w.Header().Set("Content-Type", r.ContentType())
				http.ServeContent(w, req, "export.csv.gz", baseTime, r)
			}))
			defer srv.Close()

			get := func(rangeHeader string) (*http.Response, []byte) {
				req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
				require.NoError(t, err)
				if rangeHeader != "" {
					req.Header.Set("Range", rangeHeader)
				}
				resp, err := srv.Client().Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp, body
			}

			resp, body := get("bytes=10-19")
			require.Equal(t, http.StatusPartialContent, resp.StatusCode)
			require.Equal(t, want[10:20], body)
			require.Equal(t, "bytes 10-19/"+strconv.Itoa(len(want)), resp.Header.Get("Content-Range"))
			require.Equal(t, "10", resp.Header.Get("Content-Length"))
			require.Equal(t, "application/gzip", resp.Header.Get("Content-Type"))

			resp, body = get("bytes=-7")
			require.Equal(t, http.StatusPartialContent, resp.StatusCode)
			require.Equal(t, want[len(want)-7:], body)

			resp, body = get("")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, want, body)

			resp, _ = get("bytes=" + strconv.Itoa(len(want)+10) + "-")
			require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)
		})
	}
}
