package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aetheriot/aether-audit/client"
)

// The examples talk to the server in AETHER_URL with the token in
// AETHER_TOKEN (the package's tests set both to a server of their own).

func ExampleClient_Record() {
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{Token: os.Getenv("AETHER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	ev, err := c.Record(context.Background(), client.EventInput{
		ProjectID:  "example-record",
		Action:     "device.firmware.updated",
		OccurredAt: time.Now(),
		Subject:    client.Subject{Type: client.SubjectService, ID: "device-service"},
		Resource:   client.Resource{Type: "device", ID: "dev-7"},
		Outcome:    client.OutcomeSuccess,
		Details:    []byte(`{"from":"1.0.3","to":"1.1.0"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Sequence, ev.Action, string(ev.Details))
	// Output: 1 device.firmware.updated {"from":"1.0.3","to":"1.1.0"}
}

func ExampleClient_RecordBatch() {
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{Token: os.Getenv("AETHER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	var batch []client.EventInput
	for _, dev := range []string{"dev-1", "dev-2", "dev-3"} {
		batch = append(batch, client.EventInput{
			ProjectID: "example-batch", Action: "device.registered", OccurredAt: time.Now(),
			Subject:  client.Subject{Type: client.SubjectUser, ID: "alice"},
			Resource: client.Resource{Type: "device", ID: dev}, Outcome: client.OutcomeSuccess,
		})
	}
	events, err := c.RecordBatch(context.Background(), batch)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range events {
		fmt.Println(ev.Sequence, ev.Resource.ID)
	}
	// Output:
	// 1 dev-1
	// 2 dev-2
	// 3 dev-3
}

func ExampleClient_Search() {
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{Token: os.Getenv("AETHER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i, action := range []string{"device.registered", "device.firmware.updated", "device.rebooted"} {
		_, err := c.Record(ctx, client.EventInput{
			ProjectID: "example-search", Action: action, OccurredAt: time.Now(),
			Subject:  client.Subject{Type: client.SubjectService, ID: "device-service"},
			Resource: client.Resource{Type: "device", ID: fmt.Sprint("dev-", i)}, Outcome: client.OutcomeSuccess,
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Every device.* event but the registration, newest first, two per page.
	for ev, err := range c.Search(ctx, "example-search", client.SearchOptions{
		Filter: &client.Filter{Action: "device.*", SequenceFrom: 2}, Order: client.NewestFirst, PageSize: 2,
	}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Sequence, ev.Action)
	}
	// Output:
	// 3 device.rebooted
	// 2 device.firmware.updated
}

func ExampleClient_VerifyChain() {
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{Token: os.Getenv("AETHER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	v, err := c.VerifyChain(context.Background(), "example-record", 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Valid, v.CheckedCount >= 1)
	// Output: true true
}

func ExampleError() {
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{Token: os.Getenv("AETHER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Record(context.Background(), client.EventInput{
		ProjectID: "example-error", Action: "Device Updated", OccurredAt: time.Now(),
		Subject:  client.Subject{Type: client.SubjectService, ID: "device-service"},
		Resource: client.Resource{Type: "device", ID: "dev-7"}, Outcome: client.OutcomeSuccess,
	})
	var ae *client.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Field)
	}
	// Output: BAD_USER_INPUT action
}

func ExampleNewCachingTokenSource() {
	// fetch asks the identity provider for a short-lived token; here it
	// hands out the example's token with a 15-minute lifetime.
	fetch := func(ctx context.Context) (string, time.Time, error) {
		return os.Getenv("AETHER_TOKEN"), time.Now().Add(15 * time.Minute), nil
	}
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{
		TokenSource: client.NewCachingTokenSource(fetch, time.Minute),
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.VerifyChain(context.Background(), "example-token", 0, 0)
	fmt.Println(err)
	// Output: <nil>
}

func ExampleClient_Subscribe() {
	c, err := client.New(os.Getenv("AETHER_URL"), client.Options{Token: os.Getenv("AETHER_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dev := range []string{"dev-1", "dev-2"} {
		_, err := c.Record(ctx, client.EventInput{
			ProjectID: "example-subscribe", Action: "device.rebooted", OccurredAt: time.Now(),
			Subject:  client.Subject{Type: client.SubjectSystem, ID: "watchdog"},
			Resource: client.Resource{Type: "device", ID: dev}, Outcome: client.OutcomeSuccess,
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Replays the events after sequence 0, then follows the project live;
	// a dropped connection resumes after the last event seen.
	var last uint64
	for ev, err := range c.Subscribe(ctx, "example-subscribe", client.SubscribeOptions{AfterSequence: last}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Sequence, ev.Resource.ID)
		if last = ev.Sequence; last == 2 {
			break
		}
	}
	// Output:
	// 1 dev-1
	// 2 dev-2
}
